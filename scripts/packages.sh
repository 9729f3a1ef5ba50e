# shellcheck shell=bash
# packages.sh: sourced by scripts/testenv.sh, scripts/stack.sh and scripts/hydra.sh.
#
#   packages_install_missing [--no-recommends] COMMAND[|COMMAND...]=PACKAGE ...
#
# installs with apt-get each PACKAGE none of whose COMMANDs is found (on
# PATH, in /usr/sbin or /sbin; a COMMAND that is an absolute path is a file
# that must exist, for a package of no command such as libc6-dev), and
# nothing when all are there. Installing
# starts no system service: unless the machine already has a
# /usr/sbin/policy-rc.d, one that refuses every start (exit 101) is put in
# place for the length of the install and removed afterwards. apt-get waits
# for a dpkg lock that another install holds instead of failing at once.

# as_root runs a command as root: directly, or through sudo.
as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		echo "need root for: $*" >&2
		return 1
	fi
}

# packages_have COMMAND[|COMMAND...] succeeds when one of them is found.
packages_have() {
	local cmd
	local IFS='|'
	for cmd in $1; do
		case $cmd in /*)
			[ -e "$cmd" ] && return 0
			continue
			;;
		esac
		command -v "$cmd" >/dev/null && return 0
		[ -x "/usr/sbin/$cmd" ] || [ -x "/sbin/$cmd" ] && return 0
	done
	return 1
}

packages_updated=""

packages_install_missing() {
	local flags=() pkgs=() spec pkg
	if [ "${1:-}" = --no-recommends ]; then
		flags+=(--no-install-recommends)
		shift
	fi
	for spec in "$@"; do
		pkg=${spec#*=}
		packages_have "${spec%%=*}" && continue
		case " ${pkgs[*]} " in *" $pkg "*) ;; *) pkgs+=("$pkg") ;; esac
	done
	[ ${#pkgs[@]} -gt 0 ] || return 0

	echo "packages: installing ${pkgs[*]}" >&2
	local policy=/usr/sbin/policy-rc.d placed="" rc=0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# scripts/packages.sh: no service starts while it installs.\nexit 101\n' |
			as_root tee "$policy" >/dev/null && as_root chmod 755 "$policy" && placed=1
	fi
	local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -qq)
	if [ -z "$packages_updated" ]; then
		as_root "${apt[@]}" update || rc=$?
		packages_updated=1
	fi
	if [ "$rc" = 0 ]; then
		as_root "${apt[@]}" install -y "${flags[@]}" "${pkgs[@]}" >/dev/null || rc=$?
	fi
	if [ -n "$placed" ]; then
		as_root rm -f "$policy" || echo "packages: could not remove $policy" >&2
	fi
	if [ "$rc" != 0 ]; then
		echo "packages: apt-get failed ($rc) installing ${pkgs[*]}" >&2
		return "$rc"
	fi
}
