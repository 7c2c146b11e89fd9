# The data-facility side of DESIGN.md's direct path on GCP: bucket -> OBJECT_FINALIZE
# notifications -> Pub/Sub push (OIDC-signed, dead-lettered) -> register function (Cloud
# Functions gen2) -> ArrivalEvents on Pub/Sub. Mirrors what `obsingest setup` creates locally.

locals {
  # A fixed audience (Pub/Sub accepts any string) avoids a cycle through the function's URL.
  push_audience = "obsingest-register"
  topics        = ["ccd-objects", "ccd-objects-dlq", "ccd-arrivals", "exposures", "exposure-summaries", "budget-alerts"]
}

resource "google_storage_bucket" "raw" {
  name                        = var.bucket
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
}

resource "google_pubsub_topic" "topic" {
  for_each = toset(local.topics)
  name     = each.value
}

# GCS publishes notifications as its own service agent.
data "google_storage_project_service_account" "gcs" {}

resource "google_pubsub_topic_iam_member" "gcs_publishes_objects" {
  topic  = google_pubsub_topic.topic["ccd-objects"].id
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}

resource "google_storage_notification" "finalize" {
  for_each           = toset(["raw/", "quarantine/"])
  bucket             = google_storage_bucket.raw.name
  payload_format     = "JSON_API_V1"
  topic              = google_pubsub_topic.topic["ccd-objects"].id
  event_types        = ["OBJECT_FINALIZE"]
  object_name_prefix = each.value
  depends_on         = [google_pubsub_topic_iam_member.gcs_publishes_objects]
}

resource "google_service_account" "register" {
  account_id   = "obsingest-register"
  display_name = "obsingest register function"
}

resource "google_service_account" "push" {
  account_id   = "obsingest-push"
  display_name = "Pub/Sub push identity for the register function"
}

resource "google_storage_bucket_iam_member" "register_reads" {
  bucket = google_storage_bucket.raw.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.register.email}"
}

resource "google_pubsub_topic_iam_member" "register_publishes_arrivals" {
  topic  = google_pubsub_topic.topic["ccd-arrivals"].id
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${google_service_account.register.email}"
}

resource "google_secret_manager_secret_iam_member" "register_reads_registry_url" {
  secret_id = var.registry_url_secret
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.register.email}"
}

resource "google_cloudfunctions2_function" "register" {
  name     = "obsingest-register"
  location = var.region

  build_config {
    runtime     = "python311"
    entry_point = "on_push"
    source {
      storage_source {
        bucket = var.function_source_bucket
        object = var.function_source_object
      }
    }
  }

  service_config {
    max_instance_count               = var.max_instances
    max_instance_request_concurrency = 1
    available_memory                 = "512M"
    timeout_seconds                  = 60
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    service_account_email            = google_service_account.register.email
    environment_variables = {
      OBSINGEST_STORE_URL                     = "gs://${google_storage_bucket.raw.name}"
      OBSINGEST_BUS_BACKEND                   = "pubsub"
      OBSINGEST_BUS_PUBSUB_PROJECT            = var.project
      OBSINGEST_REGISTRY_POOL_SIZE            = tostring(var.registry_pool_size)
      OBSINGEST_REGISTRY_MAX_OVERFLOW         = "0"
      OBSINGEST_FUNCTION_PUSH_AUTH            = "true"
      OBSINGEST_FUNCTION_PUSH_AUDIENCE        = local.push_audience
      OBSINGEST_FUNCTION_PUSH_SERVICE_ACCOUNT = google_service_account.push.email
    }
    secret_environment_variables {
      key        = "OBSINGEST_REGISTRY_URL"
      project_id = var.project
      secret     = var.registry_url_secret
      version    = "latest"
    }
  }
}

resource "google_cloud_run_service_iam_member" "push_invokes_register" {
  location = google_cloudfunctions2_function.register.location
  service  = google_cloudfunctions2_function.register.name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.push.email}"
}

# Pub/Sub needs to sign push tokens as the push identity and to dead-letter.
data "google_project" "this" {}

locals {
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_service_account_iam_member" "pubsub_signs_as_push" {
  service_account_id = google_service_account.push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

resource "google_pubsub_topic_iam_member" "pubsub_dead_letters" {
  topic  = google_pubsub_topic.topic["ccd-objects-dlq"].id
  role   = "roles/pubsub.publisher"
  member = local.pubsub_agent
}

resource "google_pubsub_subscription" "register_push" {
  name                 = "ccd-objects-register"
  topic                = google_pubsub_topic.topic["ccd-objects"].id
  ack_deadline_seconds = 60

  push_config {
    push_endpoint = google_cloudfunctions2_function.register.service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.push.email
      audience              = local.push_audience
    }
  }

  retry_policy {
    minimum_backoff = "1s"
    maximum_backoff = "60s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topic["ccd-objects-dlq"].id
    max_delivery_attempts = var.max_delivery_attempts
  }
}

resource "google_pubsub_subscription_iam_member" "pubsub_acks_dead_lettered" {
  subscription = google_pubsub_subscription.register_push.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

resource "google_pubsub_subscription" "dlq_inspect" {
  name  = "ccd-objects-dlq-inspect"
  topic = google_pubsub_topic.topic["ccd-objects-dlq"].id
}
