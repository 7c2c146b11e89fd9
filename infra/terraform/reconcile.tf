# Reconcile (`obsingest reconcile --every N`) as one always-on process in a Cloud Run worker pool.
#
# Why a long-running service rather than a one-shot Cloud Run job on Cloud Scheduler: the canary
# check is a comparison over time (canary written at t, its sighting recorded by the register
# function at t' in the registry), and the canary age and the objects-missing counts are metrics Prometheus
# scrapes from a live process; a job starting every minute would pay interpreter start-up each
# round, could not run rounds shorter than Scheduler's one minute, and would leave nothing to
# scrape between runs. One instance: two would do the same work twice (harmlessly, registration
# is idempotent).

resource "google_storage_bucket_iam_member" "reconcile_lists_and_reads" {
  # Listing is a bucket-level permission; reading is limited to the CCD prefixes.
  bucket = google_storage_bucket.raw.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.piece["reconcile"].member

  condition {
    title      = "list-bucket-read-ccds"
    expression = "resource.type == \"storage.googleapis.com/Bucket\" || ${local.ccd_prefixes}"
  }
}

# Writes canaries and deletes them once seen (objectUser: create, read, delete), canary/ only.
resource "google_storage_bucket_iam_member" "reconcile_writes_canaries" {
  bucket = google_storage_bucket.raw.name
  role   = "roles/storage.objectUser"
  member = google_service_account.piece["reconcile"].member

  condition {
    title      = "canary-only"
    expression = "resource.name.startsWith(\"${local.objects}/canary/\")"
  }
}

# Registers what the registry lacks through the register path: announces like the function.
resource "google_pubsub_topic_iam_member" "reconcile_publishes" {
  for_each = toset(["ccd-arrivals", "exposures-ingested"])
  topic    = google_pubsub_topic.topic[each.value].id
  role     = "roles/pubsub.publisher"
  member   = google_service_account.piece["reconcile"].member
}

resource "google_cloud_run_v2_worker_pool" "reconcile" {
  name                = "obsingest-reconcile"
  location            = var.region
  launch_stage        = "BETA"
  deletion_protection = false

  scaling {
    scaling_mode          = "MANUAL"
    manual_instance_count = 1
  }

  template {
    service_account = google_service_account.piece["reconcile"].email

    vpc_access {
      egress = "PRIVATE_RANGES_ONLY"
      network_interfaces {
        network    = google_compute_network.vpc.id
        subnetwork = google_compute_subnetwork.workloads.id
      }
    }

    containers {
      name    = "reconcile"
      image   = var.images.reconcile
      command = ["obsingest"]
      args    = ["reconcile", "--every", tostring(var.reconcile_every_seconds)]

      resources {
        limits = { cpu = "1", memory = "1Gi" }
      }

      env {
        name  = "OBSINGEST_STORE_URL"
        value = "gs://${google_storage_bucket.raw.name}"
      }
      env {
        name  = "OBSINGEST_BUS_BACKEND"
        value = "pubsub"
      }
      env {
        name  = "OBSINGEST_BUS_PUBSUB_PROJECT"
        value = var.project
      }
      env {
        name  = "OBSINGEST_BUS_EXPOSURES_INGESTED_TOPIC"
        value = google_pubsub_topic.topic["exposures-ingested"].name
      }
      env {
        name  = "OBSINGEST_RECONCILE_CANARY_PREFIX"
        value = "canary/"
      }
      env {
        # dead letters are the redrive job's (redrive.tf): this pool has no access to them
        name  = "OBSINGEST_REDRIVE_ENABLED"
        value = "false"
      }
      env {
        name  = "OBSINGEST_REGISTRY_POOL_SIZE"
        value = tostring(var.registry_pool_size)
      }
      env {
        name  = "OBSINGEST_METRICS_PORT"
        value = "8080"
      }
      env {
        name = "OBSINGEST_REGISTRY_URL"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.registry_url["registry-url"].secret_id
            version = "latest"
          }
        }
      }
    }

    dynamic "containers" {
      for_each = var.metrics_sidecar_image == null ? [] : [var.metrics_sidecar_image]
      content {
        name       = "metrics"
        image      = containers.value
        depends_on = ["reconcile"]
      }
    }
  }

  depends_on = [google_secret_manager_secret_iam_member.registry_url]
}
