# The two push-fed functions, one source archive with two entry points (Cloud Functions gen2):
# `register` (on_push) behind the push subscription on ccd-objects, `manifests` (on_manifest)
# behind the one on exposures. Both are OIDC-signed, retried and dead-lettered, and written once
# here so that the two cannot drift apart.
#
# What the code expects of a subscription (functions/register/main.py): 2xx = done (registered,
# duplicate, recorded, or quarantined with its reason), 503 = retriable (redeliver later). So:
# exponential redelivery push_min_backoff..push_max_backoff, then dead-letter after
# max_delivery_attempts: ccd-objects-dlq (kept by ccd-objects-dlq-hold for `obsingest redrive`,
# redrive.tf), exposures-dlq (kept by exposures-dlq-hold for an operator, manifests.tf).
#
# No filter on ccd-objects-register: canary notifications take the CCDs' own path to the
# function, which records each sighting in the registry (and registers nothing); reconcile
# reads those sightings.

locals {
  push_functions = {
    register = {
      function      = "obsingest-register"
      entry_point   = "on_push"
      max_instances = var.max_instances
      min_instances = var.min_instances
      topic         = "ccd-objects"
      subscription  = "ccd-objects-register"
      dead_letters  = "ccd-objects-dlq"
    }
    # one manifest per exposure (~one every 17 s): a few instances absorb a redelivery burst
    manifests = {
      function      = "obsingest-manifests"
      entry_point   = "on_manifest"
      max_instances = 5
      min_instances = 1
      topic         = "exposures"
      subscription  = "exposures-register"
      dead_letters  = "exposures-dlq"
    }
  }
}

# Each under its own identity (the key of push_functions, identities.tf); pushed to by the push
# identity with a fixed audience per function (Pub/Sub accepts any string; the function's URL
# would make a cycle), which the function verifies together with the push identity.
resource "google_cloudfunctions2_function" "push" {
  for_each = local.push_functions
  name     = each.value.function
  location = var.region

  build_config {
    runtime           = "python311"
    entry_point       = each.value.entry_point
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
    max_instance_count               = each.value.max_instances
    min_instance_count               = each.value.min_instances
    max_instance_request_concurrency = 1
    available_memory                 = "512M"
    timeout_seconds                  = 60
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.piece[each.key].email
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
      OBSINGEST_FUNCTION_PUSH_AUDIENCE        = each.value.function
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

resource "google_cloud_run_service_iam_member" "push_invokes" {
  for_each = local.push_functions
  location = google_cloudfunctions2_function.push[each.key].location
  service  = google_cloudfunctions2_function.push[each.key].name
  role     = "roles/run.invoker"
  member   = google_service_account.piece["push"].member
}

# Pub/Sub's service agent forwards dead letters: publish on the dead-letter topic, ack on the
# source subscription.
resource "google_pubsub_topic_iam_member" "pubsub_dead_letters" {
  for_each = local.push_functions
  topic    = google_pubsub_topic.topic[each.value.dead_letters].id
  role     = "roles/pubsub.publisher"
  member   = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "pubsub_acks_dead_lettered" {
  for_each     = local.push_functions
  subscription = google_pubsub_subscription.push[each.key].id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

resource "google_pubsub_subscription" "push" {
  for_each                   = local.push_functions
  name                       = each.value.subscription
  topic                      = google_pubsub_topic.topic[each.value.topic].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.week

  push_config {
    push_endpoint = google_cloudfunctions2_function.push[each.key].service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.piece["push"].email
      audience              = each.value.function
    }
  }

  retry_policy {
    minimum_backoff = var.push_min_backoff
    maximum_backoff = var.push_max_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topic[each.value.dead_letters].id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [google_pubsub_topic_iam_member.pubsub_dead_letters]
}

# Addresses before the two were folded into one for_each: an applied state moves, nothing is
# destroyed and re-created (the functions' URLs and the subscriptions' backlogs stay).
moved {
  from = google_cloudfunctions2_function.register
  to   = google_cloudfunctions2_function.push["register"]
}
moved {
  from = google_cloudfunctions2_function.manifests
  to   = google_cloudfunctions2_function.push["manifests"]
}
moved {
  from = google_cloud_run_service_iam_member.push_invokes_register
  to   = google_cloud_run_service_iam_member.push_invokes["register"]
}
moved {
  from = google_cloud_run_service_iam_member.push_invokes_manifests
  to   = google_cloud_run_service_iam_member.push_invokes["manifests"]
}
moved {
  from = google_pubsub_topic_iam_member.pubsub_dead_letters_manifests
  to   = google_pubsub_topic_iam_member.pubsub_dead_letters["manifests"]
}
moved {
  from = google_pubsub_subscription_iam_member.pubsub_acks_dead_lettered_manifests
  to   = google_pubsub_subscription_iam_member.pubsub_acks_dead_lettered["manifests"]
}
moved {
  from = google_pubsub_subscription.register_push
  to   = google_pubsub_subscription.push["register"]
}
moved {
  from = google_pubsub_subscription.manifests_push
  to   = google_pubsub_subscription.push["manifests"]
}
moved {
  from = google_pubsub_topic_iam_member.pubsub_dead_letters
  to   = google_pubsub_topic_iam_member.pubsub_dead_letters["register"]
}
moved {
  from = google_pubsub_subscription_iam_member.pubsub_acks_dead_lettered
  to   = google_pubsub_subscription_iam_member.pubsub_acks_dead_lettered["register"]
}
