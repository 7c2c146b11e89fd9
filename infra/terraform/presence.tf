# The presence API (`obsingest serve`, HTTP + JSON, read-only on the registry) as a Cloud Run
# service: internal ingress, IAM-authenticated callers only (presence_invokers), one warm
# instance at least so a first query does not pay a cold start.

resource "google_cloud_run_v2_service" "presence" {
  name                = "obsingest-presence"
  location            = var.region
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = false

  template {
    service_account                  = google_service_account.piece["presence"].email
    max_instance_request_concurrency = 80
    timeout                          = "10s"

    scaling {
      min_instance_count = 1
      max_instance_count = var.presence_max_instances
    }

    vpc_access {
      egress = "PRIVATE_RANGES_ONLY"
      network_interfaces {
        network    = google_compute_network.vpc.id
        subnetwork = google_compute_subnetwork.workloads.id
      }
    }

    containers {
      name    = "presence"
      image   = var.images.presence
      command = ["obsingest"]
      args    = ["serve", "--host", "0.0.0.0", "--port", "8080"]

      ports {
        container_port = 8080
      }

      resources {
        limits   = { cpu = "1", memory = "512Mi" }
        cpu_idle = true
      }

      env {
        name  = "OBSINGEST_REGISTRY_POOL_SIZE"
        value = tostring(var.registry_pool_size)
      }
      env {
        name = "OBSINGEST_REGISTRY_URL"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.registry_url["registry-url-readonly"].secret_id
            version = "latest"
          }
        }
      }

      startup_probe {
        http_get {
          path = "/metrics"
          port = 8080
        }
      }

      liveness_probe {
        http_get {
          path = "/metrics"
          port = 8080
        }
        period_seconds = 30
      }
    }

    dynamic "containers" {
      for_each = var.metrics_sidecar_image == null ? [] : [var.metrics_sidecar_image]
      content {
        name       = "metrics"
        image      = containers.value
        depends_on = ["presence"]
      }
    }
  }

  depends_on = [google_secret_manager_secret_iam_member.registry_url]
}

resource "google_cloud_run_v2_service_iam_member" "presence_invoker" {
  for_each = toset(var.presence_invokers)
  name     = google_cloud_run_v2_service.presence.name
  location = google_cloud_run_v2_service.presence.location
  role     = "roles/run.invoker"
  member   = each.value
}
