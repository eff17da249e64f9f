# A workspace in a Docker container. The compute is the container (started at each start,
# removed at each stop: count = tether_start_count); the home is a named volume mounted at
# /home/workspace (kept across stops, removed on delete). The container uses the host's
# network, so its agent dials the server's access URL as the server's machine would — and
# reaches every service on the server's loopback and private network too: see ../README.md,
# "Who gets what", before pushing it on a team server.
#
# The image is built here from the server's machine by build-image.sh (nothing is pulled):
# a shell and common tools, with the server's node and Tether checkout mounted read-only so
# `tether_bin agent --server` runs inside. To use your own image instead, set `image` below to
# it (e.g. "ghcr.io/acme/dev:latest", pulled by docker run): it needs /bin/sh, and either a
# glibc the server's node runs on (the mounts stay) or its own node >= 20 on PATH with a Tether
# checkout at the same path as the server's (then set mount_tether = false and adjust `command`).
#
#   bin/tether templates push examples/templates/docker --name docker

terraform {
  required_version = ">= 1.4"
}

# Set by Tether for every build (TF_VAR_tether_*).
variable "tether_workspace_id" {
  type = string
}
variable "tether_workspace_name" {
  type = string
}
variable "tether_start_count" {
  type = number
}
variable "tether_server_url" {
  type = string
}
variable "tether_agent_token" {
  type      = string
  sensitive = true
}
variable "tether_bin" {
  type = string
}

# Your own image, or "" for the one built from this machine.
variable "image" {
  type    = string
  default = ""
}
# Mount the server's node and Tether checkout read-only into the container.
variable "mount_tether" {
  type    = bool
  default = true
}

locals {
  built     = "tether-workspace:local"
  image     = var.image != "" ? var.image : local.built
  checkout  = dirname(dirname(var.tether_bin))
  volume    = "tether-home-${var.tether_workspace_id}"
  container = "tether-ws-${var.tether_workspace_id}"
}

# The image, built once per machine (kept: other workspaces use it too).
resource "terraform_data" "image" {
  count            = var.image == "" ? 1 : 0
  triggers_replace = [filesha256("${path.module}/build-image.sh")]

  provisioner "local-exec" {
    command = "sh '${path.module}/build-image.sh'"
    environment = {
      IMAGE = local.built
    }
  }
}

# The home: no count, so a stop keeps it; a delete (terraform destroy) removes it.
resource "terraform_data" "home" {
  input = local.volume

  provisioner "local-exec" {
    command = "docker volume create --label tether.workspace=\"$WS\" \"$VOLUME\""
    environment = {
      VOLUME = self.input
      WS     = var.tether_workspace_id
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "docker volume rm -f \"$VOLUME\""
    environment = {
      VOLUME = self.input
    }
  }
}

# The compute: the container and its agent, one per start. A new token is a new container, so
# a start after a failed build replaces whatever the last one left.
resource "terraform_data" "container" {
  count      = var.tether_start_count
  depends_on = [terraform_data.image, terraform_data.home]

  triggers_replace = [sha256(var.tether_agent_token)]
  input            = local.container

  provisioner "local-exec" {
    command = "sh '${path.module}/run-container.sh'"
    environment = {
      CONTAINER          = local.container
      IMAGE              = local.image
      VOLUME             = local.volume
      CHECKOUT           = local.checkout
      MOUNT_TETHER       = var.mount_tether ? "1" : ""
      TETHER_BIN         = var.tether_bin
      TETHER_SERVER_URL  = var.tether_server_url
      TETHER_AGENT_TOKEN = var.tether_agent_token
      WORKSPACE_NAME     = var.tether_workspace_name
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "docker rm -f \"$CONTAINER\""
    environment = {
      CONTAINER = self.input
    }
  }
}
