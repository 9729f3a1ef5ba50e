// Package deploy checks the container stack (docker-compose.yml, Dockerfile
// and deploy/nginx.conf) against what the program reads, without a Docker
// engine: its tests parse the files and fail when a service name, a port, an
// environment variable or a health check no longer fits together.
package deploy
