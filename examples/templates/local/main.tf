# A workspace on the server's own machine: a directory per workspace (its home, kept across
# stops, removed on delete) and a `tether agent --server` process working in it (the compute:
# started at each start, stopped by its pid). Terraform's built-in `terraform_data` and
# `local-exec` only, so it needs no provider download.
#
# Every workspace made from it runs as the server's own OS user, so whoever may make one (every
# signed-in user) can read the server's data dir and key: see ../README.md, "Who gets what".
#
#   bin/tether templates push examples/templates/local --name local

terraform {
  required_version = ">= 1.4"
}

# Set by Tether for every build (TF_VAR_tether_*).
variable "tether_workspace_id" {
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

# Where the workspaces' homes live on the server's machine.
variable "root" {
  type    = string
  default = "~/.tether-workspaces"
}

locals {
  root = pathexpand(var.root)
  home = "${local.root}/${var.tether_workspace_id}"
}

# The home: no count, so a stop keeps it and only a delete (terraform destroy) removes it.
resource "terraform_data" "home" {
  input = local.home

  provisioner "local-exec" {
    command = "mkdir -p \"$HOME_DIR\""
    environment = {
      HOME_DIR = self.input
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -rf \"$HOME_DIR\" \"$HOME_DIR.agent.log\""
    environment = {
      HOME_DIR = self.input
    }
  }
}

# The compute: the agent, one per start (count = tether_start_count). A new token means a new
# agent, so a start after a failed build replaces whatever agent the last one left.
resource "terraform_data" "agent" {
  count      = var.tether_start_count
  depends_on = [terraform_data.home]

  triggers_replace = [sha256(var.tether_agent_token)]
  input = {
    home    = local.home
    pidfile = "${local.home}.agent.pid"
    log     = "${local.home}.agent.log"
  }

  provisioner "local-exec" {
    command = "sh '${path.module}/start-agent.sh'"
    environment = {
      TETHER_BIN         = var.tether_bin
      TETHER_SERVER_URL  = var.tether_server_url
      TETHER_AGENT_TOKEN = var.tether_agent_token
      HOME_DIR           = self.input.home
      PIDFILE            = self.input.pidfile
      AGENT_LOG          = self.input.log
      SCRIPTS            = path.module
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "sh '${path.module}/stop-agent.sh'"
    environment = {
      PIDFILE = self.input.pidfile
    }
  }
}
