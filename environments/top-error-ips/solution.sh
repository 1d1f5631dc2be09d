#!/bin/bash
set -euo pipefail
cat > top_ips.sh <<'SH'
#!/bin/bash
# top_ips.sh LOGFILE [N]: the N client IPs with the most 4xx/5xx responses.
set -euo pipefail
log=${1:?usage: top_ips.sh LOGFILE [N]}
n=${2:-10}
# The status is the first field after the quoted request line, which may be "-".
LC_ALL=C awk '{
    rest = substr($0, index($0, "\"") + 1)
    rest = substr(rest, index(rest, "\"") + 1)
    split(rest, f, " ")
    if (f[1] ~ /^[45][0-9][0-9]$/) count[$1]++
} END { for (ip in count) print count[ip], ip }' "$log" |
    LC_ALL=C sort -k1,1nr -k2,2 | head -n "$n"
SH
chmod +x top_ips.sh
bash top_ips.sh access.log > top_ips.txt
cat top_ips.txt
