// preflight-dra-plugin: a minimal DRA kubelet plugin for the e2e node (e2e/harness/dra_plugin.py).
//
// It is a real DRA driver as far as the kubelet and the scheduler can tell, and prepares nothing:
//
//   - it publishes one ResourceSlice for its node (pool = the node's name) with --devices devices
//     gpu-0..gpu-N-1, attributes model (string) and index (int), capacity memory, through the
//     ResourceSlice controller of k8s.io/dynamic-resource-allocation (resourceslice.StartController,
//     called by kubeletplugin.Helper.PublishResources);
//   - it registers with the kubelet's plugin watcher (<kubelet root>/plugins_registry) and serves the
//     kubelet's DRA gRPC API (k8s.io/kubelet/pkg/apis/dra v1 and v1beta1: NodePrepareResources,
//     NodeUnprepareResources) through kubeletplugin.Start, as every driver built on that helper does;
//   - PrepareResourceClaims answers each allocated device of this driver with no CDI device (the
//     container gets nothing injected: there is no hardware), UnprepareResourceClaims has nothing to
//     undo. Health reporting is off (kubeletplugin.HealthService(false)).
//
// It follows upstream's own test driver, k8s.io/kubernetes test/e2e/dra/test-driver/app
// (kubeletplugin.go: StartPlugin, PrepareResourceClaims over claim.Status.Allocation.Devices.Results
// of its driver), without its CDI files and its gRPC call recording. Built by `e2e/build.sh
// dra-plugin` against k8s.io/kubernetes at KUBERNETES_VERSION (e2e/versions.env).
//
// Once the kubelet has confirmed the registration it prints "registered" on stdout; it runs until
// SIGTERM or SIGINT, then stops the helper (which removes its sockets; the ResourceSlice stays until
// the kubelet or the harness removes it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

type plugin struct {
	driver string
}

// PrepareResourceClaims: one kubeletplugin.Device per allocation result of this driver, no CDI ID.
func (p *plugin) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		var res kubeletplugin.PrepareResult
		if claim.Status.Allocation == nil {
			res.Err = fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
			out[claim.UID] = res
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != p.driver {
				continue
			}
			res.Devices = append(res.Devices, kubeletplugin.Device{
				Requests:   []string{r.Request},
				PoolName:   r.Pool,
				DeviceName: r.Device,
			})
		}
		fmt.Fprintf(os.Stderr, "prepared claim %s/%s: %d device(s)\n", claim.Namespace, claim.Name, len(res.Devices))
		out[claim.UID] = res
	}
	return out, nil
}

// UnprepareResourceClaims: nothing was prepared, nothing to undo.
func (p *plugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = nil
	}
	return out, nil
}

func (p *plugin) HandleError(_ context.Context, err error, msg string) {
	fmt.Fprintf(os.Stderr, "error: %s: %v\n", msg, err)
}

func (p *plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func devices(n int, model, memory string) ([]resourceapi.Device, error) {
	mem, err := resource.ParseQuantity(memory)
	if err != nil {
		return nil, fmt.Errorf("--memory: %w", err)
	}
	out := make([]resourceapi.Device, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model": {StringValue: ptr.To(model)},
				"index": {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mem}},
		})
	}
	return out, nil
}

func run() error {
	driver := flag.String("driver", "gpu.example.com", "the driver name (a DNS subdomain)")
	node := flag.String("node-name", "", "the node this plugin serves (required)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig for the apiserver (required)")
	root := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	n := flag.Int("devices", 2, "how many devices the ResourceSlice publishes")
	model := flag.String("model", "H100", "the devices' model attribute")
	memory := flag.String("memory", "80Gi", "the devices' memory capacity")
	flag.Parse()
	if *node == "" || *kubeconfig == "" {
		return errors.New("--node-name and --kubeconfig are required")
	}
	devs, err := devices(*n, *model, *memory)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dataDir := filepath.Join(*root, "plugins", *driver)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return err
	}
	registry := filepath.Join(*root, "plugins_registry")
	if err := os.MkdirAll(registry, 0o750); err != nil {
		return err
	}
	p := &plugin{driver: *driver}
	helper, err := kubeletplugin.Start(ctx, p,
		kubeletplugin.DriverName(*driver),
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(*node),
		kubeletplugin.RegistrarDirectoryPath(registry),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	pools := map[string]resourceslice.Pool{*node: {Slices: []resourceslice.Slice{{Devices: devs}}}}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: pools}); err != nil {
		return fmt.Errorf("publish the ResourceSlice: %w", err)
	}
	fmt.Fprintf(os.Stderr, "serving driver %s on node %s: %d device(s), plugin dir %s\n", *driver, *node, *n, dataDir)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	announced := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if st := helper.RegistrationStatus(); !announced && st != nil {
				if !st.PluginRegistered {
					return fmt.Errorf("the kubelet refused the registration: %s", st.Error)
				}
				fmt.Println("registered")
				announced = true
			}
		}
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "preflight-dra-plugin: %v\n", err)
		os.Exit(1)
	}
}
