# One service account per deployed piece. Every grant sits on the narrowest resource that
# carries it (bucket, topic, subscription, secret, service, job) in the file of the piece that
# needs it; the few project-level roles below have no narrower resource to sit on.

locals {
  identities = {
    register  = "obsingest register function"
    manifests = "obsingest manifests function (on_manifest: ExposureManifests into the registry)"
    push      = "Pub/Sub push identity of the register function"
    build     = "Cloud Build identity of the register function's build"
    assembler = "obsingest Kafka chunk assembler"
    reconcile = "obsingest reconcile (bucket vs registry, canary)"
    redrive   = "obsingest redrive (dead letters back to ccd-objects)"
    scheduler = "Cloud Scheduler caller of the redrive job"
    presence  = "obsingest presence API (read-only registry)"
    beam      = "Dataflow workers of the exposure summaries job"
    edge      = "Observatory edge uploader (runs off GCP; no key created here)"
  }
  # Pieces whose containers get the Managed Prometheus sidecar when metrics_sidecar_image is set.
  scraped = ["assembler", "reconcile", "presence"]
}

resource "google_service_account" "piece" {
  for_each     = local.identities
  account_id   = "obsingest-${each.key}"
  display_name = each.value
  depends_on   = [google_project_service.api]
}

# Dataflow workers: the worker role is only grantable on the project.
resource "google_project_iam_member" "beam_dataflow_worker" {
  project = var.project
  role    = "roles/dataflow.worker"
  member  = google_service_account.piece["beam"].member
}

# Function builds write their logs (project-level only).
resource "google_project_iam_member" "build_logs" {
  project = var.project
  role    = "roles/logging.logWriter"
  member  = google_service_account.piece["build"].member
}

# The metrics sidecar writes time series (project-level only); only when the sidecar runs.
resource "google_project_iam_member" "metrics_writer" {
  for_each = var.metrics_sidecar_image == null ? toset([]) : toset(local.scraped)
  project  = var.project
  role     = "roles/monitoring.metricWriter"
  member   = google_service_account.piece[each.key].member
}

# Object conditions: a grant limited to some prefixes of the raw bucket.
locals {
  objects = "projects/_/buckets/${var.bucket}/objects"
  ccd_prefixes = join(" || ", [
    "resource.name.startsWith(\"${local.objects}/raw/\")",
    "resource.name.startsWith(\"${local.objects}/quarantine/\")",
  ])
}
