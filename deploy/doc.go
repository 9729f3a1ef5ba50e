// Package deploy checks the container stack (docker-compose.yml, Dockerfile,
// deploy/nginx.conf, deploy/prometheus.yml and the Grafana provisioning
// under deploy/grafana) against what the program reads and exports, without
// a Docker engine: its tests parse the files and fail when a service name, a
// port, an environment variable, a health check, a stop grace period or a
// metric the dashboard queries no longer fits together. The dashboard's
// queries are held against the /metrics of a running instance.
package deploy
