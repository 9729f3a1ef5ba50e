// Package deploy checks the container stack (docker-compose.yml, Dockerfile,
// deploy/nginx.conf, deploy/prometheus.yml and the Grafana provisioning
// under deploy/grafana) against what the program reads and exports, without
// a Docker engine: its tests parse the files and fail when a service name, a
// port, an environment variable, a health check, a stop grace period or a
// metric the dashboard queries no longer fits together. The dashboard's
// queries are held against the /metrics of a running instance.
//
// TestStack runs the same files for real: scripts/stack.sh starts the
// topology of docker-compose.yml from Debian's packages (nginx running
// deploy/nginx.conf, filled in as the image would, Prometheus reading
// deploy/prometheus.yml), and the test sells through nginx, asks
// Prometheus every query of the dashboard and holds scripts/stack.sh down
// to leaving nothing running.
package deploy
