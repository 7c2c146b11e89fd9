# The dataset registry: Cloud SQL for PostgreSQL on a private IP only, TLS only, with backups and
# point-in-time recovery. The connection URLs (user and password included) live in Secret
# Manager, never in Terraform state: this file creates the two secrets, the bootstrap in
# README.md creates the users, runs the migrations and adds the secret versions.
#
# Two URLs, two database roles: `registry-url` (read-write: register function, reconcile) and
# `registry-url-readonly` (SELECT only: the presence API).

resource "google_sql_database_instance" "registry" {
  name                = "obsingest-registry"
  database_version    = "POSTGRES_18"
  region              = var.region
  deletion_protection = var.registry_deletion_protection

  #checkov:skip=CKV_GCP_6:ssl_mode is ENCRYPTED_ONLY: every connection is TLS, on a private IP only, authenticated by a password held in Secret Manager. checkov passes only client-certificate mode, which would add a certificate and key per process to distribute and rotate for no gain inside the VPC.

  settings {
    tier                        = var.registry_tier
    edition                     = "ENTERPRISE"
    availability_type           = "REGIONAL"
    disk_type                   = "PD_SSD"
    disk_autoresize             = true
    deletion_protection_enabled = var.registry_deletion_protection

    ip_configuration {
      ipv4_enabled    = false
      private_network = google_compute_network.vpc.id
      ssl_mode        = "ENCRYPTED_ONLY"
    }

    # Backups and maintenance in daytime at the summit (UTC-4): nights are for observing.
    backup_configuration {
      enabled                        = true
      start_time                     = "16:00"
      point_in_time_recovery_enabled = true
      transaction_log_retention_days = 7

      backup_retention_settings {
        retained_backups = 14
      }
    }

    maintenance_window {
      day          = 3
      hour         = 17
      update_track = "stable"
    }

    insights_config {
      query_insights_enabled = true
    }

    # Flags one by one, not a dynamic block: checkov reads literal blocks only.
    database_flags {
      name  = "max_connections"
      value = tostring(var.registry_max_connections)
    }
    database_flags {
      name  = "log_checkpoints"
      value = "on"
    }
    database_flags {
      name  = "log_connections"
      value = "on"
    }
    database_flags {
      name  = "log_disconnections"
      value = "on"
    }
    database_flags {
      name  = "log_duration"
      value = "on"
    }
    database_flags {
      name  = "log_lock_waits"
      value = "on"
    }
    database_flags {
      name  = "log_hostname"
      value = "on"
    }
    database_flags {
      name  = "log_min_messages"
      value = "error"
    }
    database_flags {
      name  = "log_min_error_statement"
      value = "error"
    }
    database_flags {
      name  = "log_temp_files"
      value = "0"
    }
    database_flags {
      name  = "log_min_duration_statement"
      value = "-1"
    }
    database_flags {
      name  = "log_statement"
      value = "ddl"
    }
    database_flags {
      name  = "cloudsql.enable_pgaudit"
      value = "on"
    }
    database_flags {
      name  = "pgaudit.log"
      value = "ddl,role"
    }
  }

  depends_on = [google_service_networking_connection.services]
}

resource "google_sql_database" "registry" {
  name     = "obsingest"
  instance = google_sql_database_instance.registry.name
}

resource "google_secret_manager_secret" "registry_url" {
  for_each  = toset(["registry-url", "registry-url-readonly"])
  secret_id = "obsingest-${each.value}"

  replication {
    user_managed {
      replicas {
        location = var.region
      }
    }
  }

  depends_on = [google_project_service.api]
}

locals {
  # piece -> the registry secret it reads
  registry_readers = {
    register  = "registry-url"
    manifests = "registry-url"
    reconcile = "registry-url"
    presence  = "registry-url-readonly"
  }
}

resource "google_secret_manager_secret_iam_member" "registry_url" {
  for_each  = local.registry_readers
  secret_id = google_secret_manager_secret.registry_url[each.value].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.piece[each.key].member
}
