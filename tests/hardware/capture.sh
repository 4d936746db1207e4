#!/usr/bin/env bash
# Capture, on a real NVIDIA GPU host, what the GPU facts and driver roles are tested against:
# the nvidia-smi outputs the facts module reads, the driver's package/module state, and the
# facts the module reports there (through tests/hardware/gpu-facts.yml, check mode too).
#
# Usage: tests/hardware/capture.sh OUTDIR      (from anywhere; needs python3 and ansible-core)
# Writes OUTDIR/nvidia-smi/*, OUTDIR/host-state/*, OUTDIR/facts.json, OUTDIR/ansible-*.txt and
# OUTDIR/commands.tsv (file, exit status, command).
set -u
OUT=$(mkdir -p "${1:?usage: capture.sh OUTDIR}" && cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT/nvidia-smi" "$OUT/host-state"
: >"$OUT/commands.tsv"

# cap FILE COMMAND...: stdout to FILE, stderr to FILE.stderr (kept only when not empty).
cap() {
  local file=$OUT/$1; shift
  "$@" >"$file" 2>"$file.stderr"
  printf '%s\t%s\t%s\n' "${file#"$OUT"/}" "$?" "$*" >>"$OUT/commands.tsv"
  [ -s "$file.stderr" ] || rm -f "$file.stderr"
}
sh_cap() { cap "$1" sh -c "$2"; }

QUERY=$(PYTHONPATH="$ROOT/collections" python3 -c \
  'from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi; print(" ".join(nvidia_smi.QUERY_ARGS))')
SMI=$(command -v nvidia-smi || echo nvidia-smi)

cap nvidia-smi/nvidia-smi.txt "$SMI"
cap nvidia-smi/nvidia-smi-q.txt "$SMI" -q
cap nvidia-smi/nvidia-smi-q.xml "$SMI" -q -x
# shellcheck disable=SC2086  # QUERY is two arguments
cap nvidia-smi/query.csv "$SMI" $QUERY
cap nvidia-smi/topo-m.txt "$SMI" topo -m
cap nvidia-smi/nvlink-s.txt "$SMI" nvlink -s
cap nvidia-smi/nvidia-smi-L.txt "$SMI" -L
cap nvidia-smi/nvidia-smi-version.txt "$SMI" --version
cap nvidia-smi/query-driver-version.csv "$SMI" --query-gpu=driver_version --format=csv,noheader
sh_cap nvidia-smi/env-nccl.txt 'env | grep -E "^(NCCL|NVSHMEM|TORCH_SYMM|CUDA_)" | sort'

sh_cap host-state/dpkg-l-nvidia.txt 'dpkg -l | grep -i nvidia'
cap host-state/apt-mark-showhold.txt apt-mark showhold
cap host-state/proc-driver-nvidia-version.txt cat /proc/driver/nvidia/version
sh_cap host-state/lsmod-nvidia.txt 'lsmod | grep -i nvidia'
cap host-state/systemctl-is-enabled-nvidia-persistenced.txt systemctl is-enabled nvidia-persistenced
cap host-state/os-release.txt cat /etc/os-release
cap host-state/modprobe.d.txt ls -la /etc/modprobe.d
sh_cap host-state/modprobe.d-nvidia-nouveau.txt 'grep -rHi -e nvidia -e nouveau /etc/modprobe.d /lib/modprobe.d 2>/dev/null'
cap host-state/uname.txt uname -a
sh_cap host-state/nvidia-smi-location.txt "ls -la $SMI; readlink -f $SMI; dpkg -S \$(readlink -f $SMI)"
sh_cap host-state/dev-nvidia.txt 'ls -la /dev/nvidia* /dev/nvidia-caps 2>&1'
sh_cap host-state/pid1.txt 'ps -o comm= -p 1; systemctl is-system-running 2>&1'
sh_cap host-state/nvidia-packages-policy.txt 'apt-cache policy $(dpkg -l | awk "/^.i +(nvidia|libnvidia)/ {print \$2}" | head -5)'
cap host-state/proc-cmdline.txt cat /proc/cmdline

export LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
export ANSIBLE_CONFIG=$OUT/ansible.cfg
# the clone as the collection vllm_fleet.vllm_fleet
printf '[defaults]\ncollections_path = %s/collections\ninject_facts_as_vars = false\ninterpreter_python = %s\nlocal_tmp = /tmp/ansible-local\n' \
  "$ROOT" "$(command -v python3)" >"$ANSIBLE_CONFIG"
cap ansible-version.txt ansible-playbook --version
cap ansible-run.txt ansible-playbook -c local -i localhost, "$ROOT/tests/hardware/gpu-facts.yml" \
  -e "hardware_facts_out=$OUT/facts.json"
cap ansible-check.txt ansible-playbook -c local -i localhost, "$ROOT/tests/hardware/gpu-facts.yml" \
  -e "hardware_facts_out=$OUT/facts.json" --check --diff
rm -f "$ANSIBLE_CONFIG"
cat "$OUT/commands.tsv"
