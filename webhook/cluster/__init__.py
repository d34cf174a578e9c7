"""Everything that talks to the apiserver: client, watch-backed caches, discovery, capabilities."""
