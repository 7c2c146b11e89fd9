# The manifests function: the register function's source archive deployed a second time with
# entry point `on_manifest` (Cloud Functions gen2), behind an OIDC-signed, retried and
# dead-lettered Pub/Sub push subscription on `exposures`.
#
# It records each ExposureManifest in the registry once (the basis of completeness), then checks
# the exposure: CCDs registered before their manifest complete it there, and its one
# ExposureIngested goes to `exposures-ingested` (functions/register/README.md). Replies as the
# register function's: 2xx = done (recorded, already recorded, or quarantined with its reason),
# 503 = retriable. What still fails after max_delivery_attempts goes to `exposures-dlq`, kept by
# `exposures-dlq-hold` for an operator (a manifest is small and rare: no redrive job; re-publish
# it to `exposures` by hand, recording is idempotent).
#
# Its own identity, not the register function's: it reads no object, and publishes only
# ExposureIngested.

locals {
  manifests_push_audience = "obsingest-manifests"
}

resource "google_pubsub_topic_iam_member" "manifests_publishes" {
  topic  = google_pubsub_topic.topic["exposures-ingested"].id
  role   = "roles/pubsub.publisher"
  member = google_service_account.piece["manifests"].member
}

resource "google_cloudfunctions2_function" "manifests" {
  name     = "obsingest-manifests"
  location = var.region

  build_config {
    runtime           = "python311"
    entry_point       = "on_manifest"
    service_account   = google_service_account.piece["build"].id
    docker_repository = google_artifact_registry_repository.functions.id
    source {
      storage_source {
        bucket = var.function_source_bucket
        object = var.function_source_object
      }
    }
  }

  service_config {
    # one manifest per exposure (~one every 17 s): a few instances absorb a redelivery burst
    max_instance_count               = 5
    max_instance_request_concurrency = 1
    available_memory                 = "512M"
    timeout_seconds                  = 60
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.piece["manifests"].email
    vpc_connector                    = google_vpc_access_connector.register.id
    vpc_connector_egress_settings    = "PRIVATE_RANGES_ONLY"
    environment_variables = {
      OBSINGEST_STORE_URL                     = "gs://${google_storage_bucket.raw.name}"
      OBSINGEST_BUS_BACKEND                   = "pubsub"
      OBSINGEST_BUS_PUBSUB_PROJECT            = var.project
      OBSINGEST_BUS_EXPOSURES_INGESTED_TOPIC  = google_pubsub_topic.topic["exposures-ingested"].name
      OBSINGEST_REGISTRY_POOL_SIZE            = tostring(var.registry_pool_size)
      OBSINGEST_REGISTRY_MAX_OVERFLOW         = "0"
      OBSINGEST_FUNCTION_PUSH_AUTH            = "true"
      OBSINGEST_FUNCTION_PUSH_AUDIENCE        = local.manifests_push_audience
      OBSINGEST_FUNCTION_PUSH_SERVICE_ACCOUNT = google_service_account.piece["push"].email
    }
    secret_environment_variables {
      key        = "OBSINGEST_REGISTRY_URL"
      project_id = var.project
      secret     = google_secret_manager_secret.registry_url["registry-url"].secret_id
      version    = "latest"
    }
  }

  depends_on = [
    google_artifact_registry_repository_iam_member.build_pushes,
    google_storage_bucket_iam_member.build_reads_source,
    google_secret_manager_secret_iam_member.registry_url,
  ]
}

resource "google_cloud_run_service_iam_member" "push_invokes_manifests" {
  location = google_cloudfunctions2_function.manifests.location
  service  = google_cloudfunctions2_function.manifests.name
  role     = "roles/run.invoker"
  member   = google_service_account.piece["push"].member
}

# Pub/Sub's service agent forwards dead letters: publish on exposures-dlq, ack on the source.
resource "google_pubsub_topic_iam_member" "pubsub_dead_letters_manifests" {
  topic  = google_pubsub_topic.topic["exposures-dlq"].id
  role   = "roles/pubsub.publisher"
  member = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "pubsub_acks_dead_lettered_manifests" {
  subscription = google_pubsub_subscription.manifests_push.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

resource "google_pubsub_subscription" "manifests_push" {
  name                       = "exposures-register"
  topic                      = google_pubsub_topic.topic["exposures"].id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = google_cloudfunctions2_function.manifests.service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.piece["push"].email
      audience              = local.manifests_push_audience
    }
  }

  retry_policy {
    minimum_backoff = var.push_min_backoff
    maximum_backoff = var.push_max_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topic["exposures-dlq"].id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [google_pubsub_topic_iam_member.pubsub_dead_letters_manifests]
}

# Manifests the function could not take after every attempt, kept for an operator.
resource "google_pubsub_subscription" "exposures_dlq_hold" {
  name                       = "exposures-dlq-hold"
  topic                      = google_pubsub_topic.topic["exposures-dlq"].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.week

  expiration_policy {
    ttl = ""
  }
}
