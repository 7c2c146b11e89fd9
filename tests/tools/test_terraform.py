"""infra/terraform, checked as far as this machine allows (infra/terraform/README.md).

- checkov (pinned, its own virtualenv under .cache/, offline) finds no failed check, and every
  skip is justified next to its resource;
- every resource and data source matches the Google provider's schema (the pinned release's,
  from its published CDK bindings): no unknown argument or block, nothing required missing,
  references only to declared things and to attributes their type has;
- the configuration keeps its own promises: every deployed piece is there, push subscriptions
  are retried and dead-lettered, dead letters are kept, one identity per piece with grants on
  resources rather than the project, images come from variables;
- with OBSINGEST_TERRAFORM_BUILD=1 (`make terraform-check`): `terraform fmt -check` with
  Terraform built from the Go module proxy (a cold build took 10-15 minutes here, so
  `make test` leaves it out).

The tools are fetched on first use (checkov ~10 s, the schema ~20 s); later runs reuse them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.tools

ROOT = Path(__file__).resolve().parents[2]
TF = ROOT / "infra" / "terraform"


def _load_tools() -> Any:
    spec = importlib.util.spec_from_file_location("tf_tools", TF / "checks" / "tools.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tools = _load_tools()


@pytest.fixture(scope="module")
def checkov_report() -> dict[str, Any]:
    return tools.run_checkov(TF)


@pytest.fixture(scope="module")
def config() -> dict[str, list[Any]]:
    return tools.parsed_config(TF)


def resources(config: dict[str, list[Any]], rtype: str) -> dict[str, dict[str, Any]]:
    """The resources of ``rtype`` by name; one written with ``for_each`` over a local map of
    objects (push_functions.tf) becomes one instance per key, named as Terraform addresses it
    (``push["register"]``), with ``each.key`` and ``each.value.FIELD`` substituted."""
    found: dict[str, dict[str, Any]] = {}
    for item in config.get("resource", []):
        for name, body in (item.get(rtype) or {}).items():
            found.update(_instances(config, name, body))
    return found


def _instances(config: dict[str, list[Any]], name: str, body: dict[str, Any]) -> dict[str, Any]:
    match = re.fullmatch(r"\$\{local\.(\w+)\}", str(body.get("for_each", [""])[0]))
    table = _local(config, match.group(1)) if match else None
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        return {name: body}
    return {
        f'{name}["{key}"]': _substitute({k: v for k, v in body.items() if k != "for_each"}, key, fields)
        for key, fields in table.items()
    }


def _identities_run_as(body: Any) -> list[str]:
    """The identities a resource runs as: its ``service_account`` / ``service_account_email``
    arguments naming ``google_service_account.piece[...]``, at any depth."""
    found: list[str] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key in ("service_account", "service_account_email"):
                for v in value if isinstance(value, list) else [value]:
                    m = re.fullmatch(r'\$\{google_service_account\.piece\["(\w+)"\]\.\w+\}', str(v))
                    found += [m.group(1)] if m else []
            else:
                found += _identities_run_as(value)
    elif isinstance(body, list):
        for v in body:
            found += _identities_run_as(v)
    return found


def _local(config: dict[str, list[Any]], name: str) -> Any:
    for item in config.get("locals", []):
        if name in item:
            return item[name][0] if isinstance(item[name], list) else item[name]
    return None


def _substitute(value: Any, key: str, fields: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, key, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, key, fields) for v in value]
    if not isinstance(value, str):
        return value
    whole = re.fullmatch(r"\$\{each\.(key|value\.(\w+))\}", value)
    if whole:
        return key if whole.group(1) == "key" else fields[whole.group(2)]
    value = re.sub(r"each\.value\.(\w+)", lambda m: f'"{fields[m.group(1)]}"', value)
    return value.replace("each.key", f'"{key}"')


def first(body: dict[str, Any], *path: str) -> Any:
    """python-hcl2 wraps every value and block in a list: follow the first of each."""
    for key in path:
        body = body[key][0]
    return body


# -- checkov ---------------------------------------------------------------------------------


def test_checkov_finds_no_failed_check(checkov_report: dict[str, Any]) -> None:
    report = checkov_report
    failed = report["results"]["failed_checks"]
    listing = "\n".join(
        f"{c['check_id']} {c['check_name']}: {c['resource']} ({c['file_path']}:{c['file_line_range']})"
        for c in failed
    )
    assert not failed, f"checkov failed checks:\n{listing}"
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 50  # it really looked at the resources


def test_every_checkov_skip_is_justified_next_to_its_resource(checkov_report: dict[str, Any]) -> None:
    skipped = checkov_report["results"]["skipped_checks"]
    assert skipped, "the skips below are expected to be reported as skipped"
    for check in skipped:
        reason = check.get("check_result", {}).get("suppress_comment", "")
        assert len(reason) >= 60, f"{check['check_id']} on {check['resource']}: reason {reason!r}"
    pattern = re.compile(r"#checkov:skip=(CKV2?_[A-Z]+_\d+):(.*)")
    for path in TF.glob("*.tf"):
        for line in path.read_text().splitlines():
            if "checkov:skip" in line:
                match = pattern.search(line)
                assert match and len(match.group(2).strip()) >= 60, f"{path.name}: {line.strip()}"


def test_checkov_fails_an_exposed_bucket(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(
        'resource "google_storage_bucket" "open" {\n  name = "x"\n  location = "US"\n}\n'
        'resource "google_storage_bucket_iam_member" "public" {\n  bucket = "x"\n'
        '  role = "roles/storage.objectViewer"\n  member = "allUsers"\n}\n'
    )
    failed = {c["check_id"] for c in tools.run_checkov(tmp_path)["results"]["failed_checks"]}
    assert {"CKV_GCP_29", "CKV_GCP_114", "CKV_GCP_28"} <= failed  # uniform, PAP, public member


# -- the provider's schema -------------------------------------------------------------------


def test_configuration_matches_the_google_provider_schema() -> None:
    problems = tools.schema_problems(TF)
    assert not problems, "\n".join(problems)


def test_schema_check_reports_what_terraform_validate_would(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(
        """
resource "google_pubsub_subscription" "s" {
  name                = "s"
  ack_deadline_second = 10
  retry_policy {
    minimum_backoff = "1s"
  }
  retry_policy {
    minimum_backoff = "2s"
  }
}
resource "google_sql_database_instance" "db" {
  database_version = "POSTGRES_18"
  settings {
    tier = "db-f1-micro"
    ip_configuration {
      require_ssl = true
    }
  }
}
resource "google_cloud_run_v2_service" "svc" {
  name     = "svc"
  location = "us-central1"
  uri      = "computed only"
  template {
    containers {
      image = "x"
    }
  }
}
resource "google_nonexistent_thing" "n" {}
resource "google_service_account" "sa" {
  account_id = "sa"
}
resource "google_pubsub_topic_iam_member" "m" {
  topic  = google_pubsub_topic.missing.id
  role   = local.nope
  member = "serviceAccount:${google_service_account.sa.emial}:${var.nope}"
}
"""
    )
    problems = "\n".join(tools.schema_problems(tmp_path))
    assert "google_pubsub_subscription.s: missing required argument 'topic'" in problems
    assert "unsupported argument or block 'ack_deadline_second'" in problems
    assert "block 'retry_policy' may appear once, found 2" in problems
    assert "ip_configuration: unsupported argument or block 'require_ssl'" in problems
    assert "google_cloud_run_v2_service.svc: unsupported argument or block 'uri'" in problems
    assert "unknown resource type 'google_nonexistent_thing'" in problems
    assert "reference to undeclared resource google_pubsub_topic.missing" in problems
    assert "google_service_account has no attribute 'emial'" in problems
    assert "reference to undeclared local.nope" in problems
    assert "reference to undeclared var.nope" in problems


# -- the configuration's own promises --------------------------------------------------------


def test_every_deployed_piece_is_declared(config: dict[str, list[Any]]) -> None:
    functions = resources(config, "google_cloudfunctions2_function")
    entry_points = {f["name"][0]: first(f, "build_config")["entry_point"][0] for f in functions.values()}
    assert entry_points == {"obsingest-register": "on_push", "obsingest-manifests": "on_manifest"}
    pools = resources(config, "google_cloud_run_v2_worker_pool")
    args = {name: first(pool, "template", "containers")["args"][0] for name, pool in pools.items()}
    assert args["assembler"] == ["assembler"]
    assert args["reconcile"][:2] == ["reconcile", "--every"]
    job = resources(config, "google_cloud_run_v2_job")["redrive"]
    assert first(job, "template", "template", "containers")["args"][0] == ["redrive"]
    assert "redrive" in resources(config, "google_cloud_scheduler_job")
    presence = resources(config, "google_cloud_run_v2_service")["presence"]
    assert first(presence, "template", "containers")["args"][0][0] == "serve"
    assert presence["ingress"] == ["INGRESS_TRAFFIC_INTERNAL_ONLY"]
    topics = first(next(i for i in config["locals"] if "topics" in i), "topics")
    assert set(topics) == {
        "ccd-objects",
        "ccd-objects-dlq",
        "ccd-objects-dlq-parked",
        "ccd-arrivals",
        "exposures",
        "exposures-dlq",
        "exposures-ingested",
        "exposure-summaries",
        "budget-alerts",
        "exposure-events-dlq",
    }
    assert "beam" in resources(config, "google_pubsub_subscription")


def test_registry_is_private_tls_only_and_backed_up(config: dict[str, list[Any]]) -> None:
    settings = first(resources(config, "google_sql_database_instance")["registry"], "settings")
    ip = first(settings, "ip_configuration")
    assert ip["ipv4_enabled"] == [False] and ip["private_network"]
    assert ip["ssl_mode"] == ["ENCRYPTED_ONLY"]
    backup = first(settings, "backup_configuration")
    assert backup["enabled"] == [True] and backup["point_in_time_recovery_enabled"] == [True]


def test_raw_bucket_is_private_versioned_and_notifies(config: dict[str, list[Any]]) -> None:
    raw = resources(config, "google_storage_bucket")["raw"]
    assert raw["uniform_bucket_level_access"] == [True]
    assert raw["public_access_prevention"] == ["enforced"]
    assert first(raw, "versioning")["enabled"] == [True]
    notification = resources(config, "google_storage_notification")["finalize"]
    assert notification["event_types"] == [["OBJECT_FINALIZE"]]


def test_push_subscriptions_are_retried_dead_lettered_and_dead_letters_kept(
    config: dict[str, list[Any]],
) -> None:
    subscriptions = resources(config, "google_pubsub_subscription")
    push = {n: s for n, s in subscriptions.items() if "push_config" in s}
    assert push, "the register function is fed by push"
    held_topics = {s["topic"][0] for s in subscriptions.values() if "push_config" not in s}
    publishers = resources(config, "google_pubsub_topic_iam_member")
    subscribers = resources(config, "google_pubsub_subscription_iam_member")
    for name, sub in push.items():
        assert "retry_policy" in sub and "dead_letter_policy" in sub, name
        dlq = first(sub, "dead_letter_policy")["dead_letter_topic"][0]
        assert dlq in held_topics, f"{name}: nothing keeps what lands on {dlq}"
        assert any(
            b["topic"][0] == dlq
            and b["member"][0] == "${local.pubsub_agent}"
            and b["role"][0] == "roles/pubsub.publisher"
            for b in publishers.values()
        ), f"{name}: Pub/Sub's service agent cannot publish dead letters to {dlq}"
        assert any(
            b["subscription"][0] == f"${{google_pubsub_subscription.{name}.id}}"
            and b["member"][0] == "${local.pubsub_agent}"
            for b in subscribers.values()
        ), f"{name}: Pub/Sub's service agent cannot ack what it dead-letters"
        auth = first(sub, "push_config", "oidc_token")
        assert auth["service_account_email"] and auth["audience"]


def test_one_identity_per_piece_and_no_broad_grants(config: dict[str, list[Any]]) -> None:
    project_roles = {
        (b["role"][0], b["member"][0]) for b in resources(config, "google_project_iam_member").values()
    }
    allowed = {
        ("roles/dataflow.worker", '${google_service_account.piece["beam"].member}'),
        ("roles/logging.logWriter", '${google_service_account.piece["build"].member}'),
        ("roles/monitoring.metricWriter", "${google_service_account.piece[each.key].member}"),
    }
    assert project_roles <= allowed, project_roles - allowed
    text = "\n".join(p.read_text() for p in TF.glob("*.tf"))
    assert "allUsers" not in text and "allAuthenticatedUsers" not in text
    for forbidden in ("roles/owner", "roles/editor", "roles/storage.admin", "roles/pubsub.admin"):
        assert forbidden not in text
    rtypes = {t for i in config.get("resource", []) for t, v in i.items() if isinstance(v, dict)}
    accounts = [
        account
        for rtype in sorted(rtypes)
        for body in resources(config, rtype).values()
        for account in _identities_run_as(body)
    ]
    workloads = [a for a in accounts if a not in ("push", "build", "scheduler")]
    assert sorted(workloads) == sorted(set(workloads)), "two workloads share an identity"
    assert {"register", "manifests", "assembler", "reconcile", "redrive", "presence"} <= set(workloads)


def test_images_are_variables_pinned_by_digest(config: dict[str, list[Any]]) -> None:
    text = "\n".join(p.read_text() for p in TF.glob("*.tf"))
    images = re.findall(r"^\s*image\s*=\s*(\S+)", text, flags=re.M)
    assert images and all(i.startswith(("var.images.", "containers.value")) for i in images), images
    assert "@sha256:[0-9a-f]{64}$" in (TF / "variables.tf").read_text()


# -- Terraform itself (make terraform-check) --------------------------------------------------

if os.environ.get("OBSINGEST_TERRAFORM_BUILD") == "1":  # 10-15 min cold build: not in make test

    def test_terraform_fmt_check() -> None:
        assert shutil.which("go") or Path("/usr/local/go/bin/go").exists()
        diff = tools.terraform_fmt_problems(TF)
        assert not diff, f"terraform fmt -check:\n{diff}"


def test_the_local_dead_letter_names_are_the_deployed_ones(config: dict[str, list[Any]]) -> None:
    """Redrive and the local stack name the hold and parked places by the kernel's rule
    (``BusSettings``); the deployment declares them by hand."""
    from obsingest.settings import BusSettings, hold_subscription

    bus = BusSettings()
    subscriptions = resources(config, "google_pubsub_subscription")
    kept = {s["name"][0]: s["topic"][0] for s in subscriptions.values() if "push_config" not in s}
    expected = {
        bus.objects_dlq_hold: bus.objects_dlq_topic,
        hold_subscription(bus.objects_parked_topic): bus.objects_parked_topic,
        hold_subscription(bus.exposures_dlq_topic): bus.exposures_dlq_topic,
    }
    for name, topic in expected.items():
        assert name in kept, f"{name} is not deployed (deployed: {sorted(kept)})"
        assert kept[name] == f'${{google_pubsub_topic.topic["{topic}"].id}}', (name, kept[name])
