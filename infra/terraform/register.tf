# The register function (Cloud Functions gen2, entry point `on_push`) behind an OIDC-signed,
# filtered, retried and dead-lettered Pub/Sub push subscription on ccd-objects.
#
# What the code expects of the subscription (functions/register/main.py): 2xx = done (registered,
# duplicate, or quarantined with its reason), 503 = retriable (redeliver later). So: exponential
# redelivery push_min_backoff..push_max_backoff, then dead-letter to ccd-objects-dlq after
# max_delivery_attempts, where ccd-objects-dlq-hold keeps it for `obsingest redrive`.

locals {
  # A fixed audience (Pub/Sub accepts any string) avoids a cycle through the function's URL.
  push_audience = "obsingest-register"
}

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

resource "google_cloudfunctions2_function" "register" {
  name     = "obsingest-register"
  location = var.region

  build_config {
    runtime           = "python311"
    entry_point       = "on_push"
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
    max_instance_count               = var.max_instances
    max_instance_request_concurrency = 1
    available_memory                 = "512M"
    timeout_seconds                  = 60
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.piece["register"].email
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
      OBSINGEST_FUNCTION_PUSH_AUDIENCE        = local.push_audience
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

resource "google_cloud_run_service_iam_member" "push_invokes_register" {
  location = google_cloudfunctions2_function.register.location
  service  = google_cloudfunctions2_function.register.name
  role     = "roles/run.invoker"
  member   = google_service_account.piece["push"].member
}

# Pub/Sub signs push tokens as the push identity (needed on projects created before
# 2021-04-08; harmless after) ...
resource "google_service_account_iam_member" "pubsub_signs_as_push" {
  service_account_id = google_service_account.piece["push"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

# ... and forwards dead letters: publish on the dead-letter topic, ack on the source subscription.
resource "google_pubsub_topic_iam_member" "pubsub_dead_letters" {
  topic  = google_pubsub_topic.topic["ccd-objects-dlq"].id
  role   = "roles/pubsub.publisher"
  member = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "pubsub_acks_dead_lettered" {
  subscription = google_pubsub_subscription.register_push.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

resource "google_pubsub_subscription" "register_push" {
  name                       = "ccd-objects-register"
  topic                      = google_pubsub_topic.topic["ccd-objects"].id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"
  # No filter: canary notifications take the CCDs' own path to the function, which records each
  # sighting in the registry (and registers nothing); reconcile reads those sightings.

  push_config {
    push_endpoint = google_cloudfunctions2_function.register.service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.piece["push"].email
      audience              = local.push_audience
    }
  }

  retry_policy {
    minimum_backoff = var.push_min_backoff
    maximum_backoff = var.push_max_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topic["ccd-objects-dlq"].id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [google_pubsub_topic_iam_member.pubsub_dead_letters]
}
