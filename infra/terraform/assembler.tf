# The Kafka chunk assembler (`obsingest assembler`) as a Cloud Run worker pool.
#
# Why a worker pool: the assembler is a pull consumer that runs all the time. A worker pool is
# Cloud Run's kind for exactly that: no ingress, no request-driven autoscaling or CPU throttling,
# a fixed instance count (one consumer each in group ccd-assembler), SIGTERM with a grace period
# on redeploy or scale-in (the assembler then commits its safe offsets and leaves the group; a
# SIGKILL loses nothing either). No cluster or instance group to run, unlike GKE or a Compute
# Engine MIG. Kafka itself is given (kafka_bootstrap_servers), reached over the VPC.

resource "google_storage_bucket_iam_member" "assembler_writes" {
  # Create-once writes and the stat/read of an existing object on a 412, raw/ and quarantine/.
  for_each = toset(["roles/storage.objectCreator", "roles/storage.objectViewer"])
  bucket   = google_storage_bucket.raw.name
  role     = each.value
  member   = google_service_account.piece["assembler"].member

  condition {
    title      = "ccd-objects"
    expression = local.ccd_prefixes
  }
}

resource "google_secret_manager_secret_iam_member" "assembler_kafka_client" {
  count     = var.kafka_client_secret == null ? 0 : 1
  secret_id = var.kafka_client_secret
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.piece["assembler"].member
}

resource "google_cloud_run_v2_worker_pool" "assembler" {
  name                = "obsingest-assembler"
  location            = var.region
  launch_stage        = "BETA"
  deletion_protection = false

  scaling {
    scaling_mode          = "MANUAL"
    manual_instance_count = var.assembler_instances
  }

  template {
    service_account = google_service_account.piece["assembler"].email

    vpc_access {
      egress = "PRIVATE_RANGES_ONLY"
      network_interfaces {
        network    = google_compute_network.vpc.id
        subnetwork = google_compute_subnetwork.workloads.id
      }
    }

    containers {
      name    = "assembler"
      image   = var.images.assembler
      command = ["obsingest"]
      args    = ["assembler"]

      resources {
        # memory_limit_bytes (512 MiB of open files) + finished files waiting for the store.
        limits = { cpu = "2", memory = "2Gi" }
      }

      env {
        name  = "OBSINGEST_ASSEMBLER_BOOTSTRAP_SERVERS"
        value = var.kafka_bootstrap_servers
      }
      env {
        name  = "OBSINGEST_ASSEMBLER_STORE_URL"
        value = "gs://${google_storage_bucket.raw.name}"
      }
      env {
        name  = "OBSINGEST_METRICS_PORT"
        value = "8080"
      }
      dynamic "env" {
        for_each = var.kafka_client_secret == null ? [] : [var.kafka_client_secret]
        content {
          name = "OBSINGEST_ASSEMBLER_EXTRA"
          value_source {
            secret_key_ref {
              secret  = env.value
              version = "latest"
            }
          }
        }
      }
    }

    dynamic "containers" {
      for_each = var.metrics_sidecar_image == null ? [] : [var.metrics_sidecar_image]
      content {
        name       = "metrics"
        image      = containers.value
        depends_on = ["assembler"]
      }
    }
  }

  depends_on = [
    google_storage_bucket_iam_member.assembler_writes,
    google_secret_manager_secret_iam_member.assembler_kafka_client,
  ]
}
