# The register function's own pieces: build, its identity's grants, the push identity. The
# function itself and its push subscription on ccd-objects are `push["register"]` in
# push_functions.tf (with the manifests function, the same source archive).
#
# What the code expects of the subscription (functions/register/main.py): 2xx = done (registered,
# duplicate, or quarantined with its reason), 503 = retriable (redeliver later). So: exponential
# redelivery push_min_backoff..push_max_backoff, then dead-letter to ccd-objects-dlq after
# max_delivery_attempts, where ccd-objects-dlq-hold keeps it for `obsingest redrive`.

resource "google_artifact_registry_repository" "functions" {
  repository_id = "obsingest-functions"
  location      = var.region
  format        = "DOCKER"
  description   = "Images Cloud Build makes of the register function."

  #checkov:skip=CKV_GCP_84:Holds build outputs of our own open source; Google-managed encryption at rest suffices and a customer key would be one more thing a deploy depends on.

  depends_on = [google_project_service.api]
}

resource "google_artifact_registry_repository_iam_member" "build_pushes" {
  repository = google_artifact_registry_repository.functions.name
  location   = google_artifact_registry_repository.functions.location
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.piece["build"].member
}

resource "google_storage_bucket_iam_member" "build_reads_source" {
  bucket = var.function_source_bucket
  role   = "roles/storage.objectViewer"
  member = google_service_account.piece["build"].member
}

# Reads the CCDs it registers (raw/ and quarantine/ only).
resource "google_storage_bucket_iam_member" "register_reads" {
  bucket = google_storage_bucket.raw.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.piece["register"].member

  condition {
    title      = "ccd-objects"
    expression = local.ccd_prefixes
  }
}

# Announces CCDs and complete exposures.
resource "google_pubsub_topic_iam_member" "register_publishes" {
  for_each = toset(["ccd-arrivals", "exposures-ingested"])
  topic    = google_pubsub_topic.topic[each.value].id
  role     = "roles/pubsub.publisher"
  member   = google_service_account.piece["register"].member
}

# Pub/Sub signs push tokens as the push identity (needed on projects created before
# 2021-04-08; harmless after).
resource "google_service_account_iam_member" "pubsub_signs_as_push" {
  service_account_id = google_service_account.piece["push"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}
