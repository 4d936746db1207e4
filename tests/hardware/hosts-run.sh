#!/usr/bin/env bash
# Run playbooks/hosts.yml (GPU facts + the NVIDIA driver role) on the machine this runs on, a real
# GPU host, as root: check mode first, then for real. On a host that already runs the wanted
# driver the driver role must change nothing. Two refusals follow in check mode, on the same
# hardware: a driver branch other than the one running outside the package manager, and a vLLM
# image that needs a newer CUDA than the driver supports.
#
# Usage: tests/hardware/hosts-run.sh OUTDIR [BRANCH]   (BRANCH: the running driver's, default 580)
# Needs ansible-core (and community.docker, ansible.posix) for the python3 on PATH.
# Writes OUTDIR/hosts-*.txt, OUTDIR/ansible-version.txt and OUTDIR/commands.tsv
# (file, exit status, command).
set -u
OUT=$(mkdir -p "${1:?usage: hosts-run.sh OUTDIR [BRANCH]}" && cd "$1" && pwd)
BRANCH=${2:-580}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
INV=$(mktemp /tmp/hosts-run-inventory.XXXXXX.yml)
trap 'rm -f "$INV"' EXIT
printf 'gpu_nodes:\n  hosts:\n    localhost:\n      ansible_connection: local\n' >"$INV"
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_CACHE_PLUGIN=memory
: >"$OUT/commands.tsv"
ansible-playbook --version >"$OUT/ansible-version.txt" 2>&1

# run NAME ARGS...: one playbook run (already root: no sudo, which such hosts may lack)
run() {
  local name=$1; shift
  ansible-playbook -i "$INV" playbooks/hosts.yml -e ansible_become=false "$@" >"$OUT/$name.txt" 2>&1
  printf '%s\t%s\t%s\n' "$name.txt" "$?" \
    "ansible-playbook -i <gpu_nodes: localhost, local> playbooks/hosts.yml -e ansible_become=false $*" >>"$OUT/commands.tsv"
}

run hosts-driver-check --tags gpu_facts,nvidia_driver -e "nvidia_driver_branch=$BRANCH" --check --diff
run hosts-driver-run --tags gpu_facts,nvidia_driver -e "nvidia_driver_branch=$BRANCH"
run hosts-driver-other-branch-check --tags gpu_facts,nvidia_driver -e nvidia_driver_branch=570 --check
run hosts-cuda-check --tags gpu_facts,nvidia_container_toolkit_preflight \
  -e nvidia_container_toolkit_manage=false -e vllm_image_cuda_version=13.1 --check
cat "$OUT/commands.tsv"
grep -h -A3 'PLAY RECAP' "$OUT"/hosts-*.txt
