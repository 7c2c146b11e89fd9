# Redrive (`obsingest redrive`): dead-lettered notifications from ccd-objects-dlq-hold back to
# ccd-objects, as a Cloud Run job run by Cloud Scheduler (redrive_schedule) and by hand:
#   gcloud run jobs execute obsingest-redrive --region R --args=redrive,--dry-run
# A job, not a service: it has nothing to do between runs, and each run is bounded (it drains
# what is waiting, with the command's own backoff and attempt bound, then exits).

resource "google_pubsub_subscription_iam_member" "redrive_drains_dead_letters" {
  subscription = google_pubsub_subscription.objects_dlq_hold.id
  role         = "roles/pubsub.subscriber"
  member       = google_service_account.piece["redrive"].member
}

# Republishes due dead letters to ccd-objects; parks those past their last redrive.
resource "google_pubsub_topic_iam_member" "redrive_republishes" {
  for_each = toset(["ccd-objects", "ccd-objects-dlq-parked"])
  topic    = google_pubsub_topic.topic[each.value].id
  role     = "roles/pubsub.publisher"
  member   = google_service_account.piece["redrive"].member
}

resource "google_cloud_run_v2_job" "redrive" {
  name                = "obsingest-redrive"
  location            = var.region
  deletion_protection = false

  template {
    task_count  = 1
    parallelism = 1

    template {
      service_account = google_service_account.piece["redrive"].email
      max_retries     = 1
      timeout         = "600s"

      containers {
        image   = var.images.redrive
        command = ["obsingest"]
        args    = ["redrive"]

        resources {
          limits = { cpu = "1", memory = "512Mi" }
        }

        env {
          name  = "OBSINGEST_BUS_PUBSUB_PROJECT"
          value = var.project
        }
        env {
          name  = "OBSINGEST_BUS_OBJECTS_TOPIC"
          value = google_pubsub_topic.topic["ccd-objects"].name
        }
        env {
          name  = "OBSINGEST_REDRIVE_SUBSCRIPTION"
          value = google_pubsub_subscription.objects_dlq_hold.id
        }
        env {
          name  = "OBSINGEST_REDRIVE_PARKED_TOPIC"
          value = google_pubsub_topic.topic["ccd-objects-dlq-parked"].name
        }
      }
    }
  }

  depends_on = [
    google_pubsub_subscription_iam_member.redrive_drains_dead_letters,
    google_pubsub_topic_iam_member.redrive_republishes,
  ]
}

# The scheduler's identity may run this job and nothing else.
resource "google_cloud_run_v2_job_iam_member" "scheduler_runs_redrive" {
  name     = google_cloud_run_v2_job.redrive.name
  location = google_cloud_run_v2_job.redrive.location
  role     = "roles/run.invoker"
  member   = google_service_account.piece["scheduler"].member
}

resource "google_cloud_scheduler_job" "redrive" {
  name             = "obsingest-redrive"
  region           = var.region
  description      = "Run obsingest redrive: dead-lettered notifications back to ccd-objects."
  schedule         = var.redrive_schedule
  time_zone        = "Etc/UTC"
  attempt_deadline = "60s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = "https://run.googleapis.com/v2/${google_cloud_run_v2_job.redrive.id}:run"

    oauth_token {
      service_account_email = google_service_account.piece["scheduler"].email
      scope                 = "https://www.googleapis.com/auth/cloud-platform"
    }
  }

  depends_on = [google_cloud_run_v2_job_iam_member.scheduler_runs_redrive]
}
