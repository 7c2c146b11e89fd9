# One private network for the data-facility workloads: the registry has a private IP only, the
# Cloud Run pieces reach it through direct VPC egress, the register function through a
# Serverless VPC Access connector (Cloud Functions has no direct egress), Dataflow workers run
# without public IPs (Private Google Access reaches the Google APIs).

resource "google_compute_network" "vpc" {
  name                    = "obsingest"
  auto_create_subnetworks = false
  depends_on              = [google_project_service.api]
}

resource "google_compute_subnetwork" "workloads" {
  name                     = "obsingest-workloads"
  region                   = var.region
  network                  = google_compute_network.vpc.id
  ip_cidr_range            = var.network_cidr
  private_ip_google_access = true

  log_config {
    aggregation_interval = "INTERVAL_5_MIN"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# Private services access: the range Cloud SQL's private IP comes from.
resource "google_compute_global_address" "services" {
  name          = "obsingest-private-services"
  purpose       = "VPC_PEERING"
  address_type  = "INTERNAL"
  prefix_length = 20
  network       = google_compute_network.vpc.id
}

resource "google_service_networking_connection" "services" {
  network                 = google_compute_network.vpc.id
  service                 = "servicenetworking.googleapis.com"
  reserved_peering_ranges = [google_compute_global_address.services.name]
}

resource "google_vpc_access_connector" "register" {
  name          = "obsingest-register"
  region        = var.region
  network       = google_compute_network.vpc.name
  ip_cidr_range = var.connector_cidr
  min_instances = 2
  max_instances = 10
  machine_type  = "e2-micro"
}

# Dataflow workers talk to each other on 12345-12346 (shuffle, streaming); nothing else comes in.
resource "google_compute_firewall" "dataflow_internal" {
  name        = "obsingest-dataflow-internal"
  network     = google_compute_network.vpc.id
  direction   = "INGRESS"
  source_tags = ["dataflow"]
  target_tags = ["dataflow"]

  allow {
    protocol = "tcp"
    ports    = ["12345-12346"]
  }

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}
