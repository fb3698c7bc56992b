# Sourced by the benchmark scripts: `print_machine` prints the Markdown "Machine" header
# (date, cores, CPU, memory, rustc, git commit) that every benchmark output starts with.
print_machine() {
    local cpu
    cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
    echo "## Machine"
    echo
    echo "- date (UTC): $(date -u +%F)"
    echo "- cores (nproc): $(nproc)"
    echo "- CPU: ${cpu:-unknown}"
    echo "- memory: $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo unknown)"
    echo "- rustc: $(rustc --version)"
    echo "- git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
}
