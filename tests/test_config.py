"""Config: a bad file stops start-up with the field path and the reason."""

import pytest

from webhook.checks import all_checks, check_names
from webhook.config import ConfigError, Settings, load_settings


def write(tmp_path, text: str):
    p = tmp_path / "policy.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_defaults_without_a_file():
    s = load_settings(None)
    assert (s.mode, s.timeout_action, s.budget_seconds, s.safety_margin_seconds) == ("enforce", "warn", 4.0, 0.5)
    assert "nvcr.io" in s.public_registries
    assert s.action_for("Image Reference") == "deny"


def test_empty_file_is_all_defaults(tmp_path):
    assert load_settings(write(tmp_path, "")) == Settings()


def test_valid_file_uses_camel_case_keys(tmp_path):
    s = load_settings(
        write(
            tmp_path,
            """
mode: warn
checks: {Image Reference: warn, Name Length: off}
timeoutAction: deny
budgetSeconds: 2.5
publicRegistries: [registry.corp.example]
kueue: {leaseMaxAgeSeconds: 30}
""",
        )
    )
    assert s.mode == "warn"
    assert s.action_for("Image Reference") == "warn" and s.action_for("Name Length") == "off"
    assert s.timeout_action == "deny" and s.budget_seconds == 2.5
    assert s.public_registries == ["registry.corp.example"]
    assert s.kueue.lease_max_age_seconds == 30


def test_unknown_check_name_is_rejected_with_the_field_path(tmp_path):
    p = write(tmp_path, "checks: {Imagе Reference: warn}\n")  # Cyrillic е: a name that looks right but is not
    with pytest.raises(ConfigError) as exc:
        load_settings(p, known_checks=check_names())
    text = str(exc.value)
    assert text.startswith(
        f"config file {p} is invalid:\n  checks: Value error, unknown check name(s) 'Imagе Reference'; known: "
    )
    assert "Image Reference" in text.split("known: ", 1)[1]


def test_unknown_skippable_check_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"skippableChecks: Value error, unknown check name\(s\) 'Nope'"):
        load_settings(write(tmp_path, "skippableChecks: [Nope]\n"), known_checks=check_names())


@pytest.mark.parametrize(
    "text, line",
    [
        ("mode: strict\n", "  mode: Input should be 'enforce', 'warn' or 'audit'"),
        ("checks: {Name Length: block}\n", "  checks.Name Length: Input should be 'deny', 'warn', 'audit' or 'off'"),
        ("budgetSeconds: 60\n", "  budgetSeconds: Input should be less than or equal to 30"),
        ("budgetSeconds: 0\n", "  budgetSeconds: Input should be greater than 0"),
        ("timeoutAction: off\n", "  timeoutAction: Input should be 'deny', 'warn' or 'audit'"),
        ("kueue: {leaseMaxAgeSeconds: -1}\n", "  kueue.leaseMaxAgeSeconds: Input should be greater than 0"),
        ("kueue: {bogus: 1}\n", "  kueue.bogus: Extra inputs are not permitted"),
        ("modes: warn\n", "  modes: Extra inputs are not permitted"),
    ],
)
def test_bad_values_name_the_field(tmp_path, text, line):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_settings(p)
    assert str(exc.value).startswith(f"config file {p} is invalid:\n")
    assert line in str(exc.value).splitlines()


def test_several_errors_are_all_reported(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_settings(write(tmp_path, "mode: x\nbudgetSeconds: 99\n"))
    assert len(str(exc.value).splitlines()) == 3


def test_missing_file_bad_yaml_and_non_mapping(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=f"^config file {missing} does not exist$"):
        load_settings(missing)
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_settings(write(tmp_path, "mode: [unclosed\n"))
    with pytest.raises(ConfigError, match="the top level must be a mapping, not list$"):
        load_settings(write(tmp_path, "- a\n- b\n"))


def test_bare_yaml_off_means_the_action_off(tmp_path):
    # YAML 1.1 reads `off` as false; the documented `Check Name: off` must still work
    s = load_settings(write(tmp_path, "checks:\n  Name Length: off\n"))
    assert s.action_for("Name Length") == "off"


def test_node_checks_deny_by_default_and_can_be_lowered():
    # the placement checks FAIL only when nothing could add a node (models/provisioning.py), so they deny
    own = {c.name: c.default_action for c in all_checks()}
    s = Settings()
    assert s.action_for("Node Selector Match", own["Node Selector Match"]) == "deny"
    assert s.action_for("Per-Node Schedulability", own["Per-Node Schedulability"]) == "deny"
    assert s.action_for("Controllers", own["Controllers"]) == "warn"
    configured = Settings(checks={"Node Selector Match": "warn"})
    assert configured.action_for("Node Selector Match", own["Node Selector Match"]) == "warn"


def test_settings_are_plain_data_check_names_are_checked_where_wired(tmp_path):
    # without the wired-in names (a library caller, a test) any name is data; `serve` and `check` pass them
    p = write(tmp_path, "checks: {My Own Check: warn}\nskippableChecks: [My Own Check]\n")
    assert load_settings(p).action_for("My Own Check") == "warn"
    with pytest.raises(ConfigError, match=r"checks: Value error, unknown check name\(s\) 'My Own Check'"):
        load_settings(p, known_checks=check_names())
