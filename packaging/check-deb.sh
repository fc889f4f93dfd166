#!/usr/bin/env bash
# Builds the Debian package and checks it on this machine, as root (it installs and purges it):
#   - installs it with dpkg -i; the files are where Debian puts them;
#   - `systemd-analyze verify` accepts both installed units (the template as an instance) and
#     `systemd-analyze security --offline=true` rates each at exposure 2.0 or less;
#   - the installed binary reads the shipped example log (`--once`) and with the shipped pattern
#     file, and names this commit in --version and build_info;
#   - the man pages and the bash completion are there and load;
#   - /etc/default/sglang-log-exporter is a conffile: an edit survives a reinstall and a
#     removal, and purge deletes it;
#   - after `dpkg --purge` nothing of the package is left.
# .ci/run runs it after the tests. Without systemd as PID 1 (a container, CI) the units are
# checked, not started.
set -euo pipefail
cd "$(dirname "$0")/.."

pkg=sglang-log-exporter
fail() {
  echo "check-deb: FAIL: $*" >&2
  exit 1
}
step() { echo "check-deb: [${SECONDS}s] $*"; }

[[ $(id -u) == 0 ]] || fail "run as root (it installs and purges the package)"
err=$(mktemp)
# man-db's dpkg trigger re-indexes every man page on each install and removal (about 30 s each
# here); its switch is this file. It is off during the check and restored at the end; `man -w`
# finds pages without the index.
autoupdate=/var/lib/man-db/auto-update
[[ -e $autoupdate ]] && mv $autoupdate $autoupdate.check-deb
cleanup() {
  rm -f "$err"
  if [[ -e $autoupdate.check-deb ]]; then mv $autoupdate.check-deb $autoupdate; fi
}
trap cleanup EXIT
if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q installed; then
  step "purging the $pkg installed before this check"
  dpkg --purge "$pkg" >/dev/null
fi

deb=$(bash packaging/build-deb.sh | tail -n 1)
[[ -f $deb ]] || fail "no package built ($deb)"
step "built $deb ($(du -k "$deb" | cut -f1) KiB)"
dpkg -i "$deb" >/dev/null

# Files where Debian looks for them ((/usr)/lib/systemd/system: merged /usr or not).
unitdir=$(dirname "$(dpkg -L "$pkg" | grep '/systemd/system/sglang-log-exporter.service$')")
for f in /usr/bin/$pkg "$unitdir/$pkg.service" "$unitdir/$pkg@.service" /etc/default/$pkg \
  /usr/share/$pkg/patterns/sglang.yaml /usr/share/$pkg/monitoring/alerts.yml \
  /usr/share/$pkg/monitoring/grafana-dashboard.json /usr/share/$pkg/examples/pd-decode-session.log \
  /usr/share/$pkg/monitoring/provisioning/dashboards/sglang.yaml \
  /usr/share/$pkg/monitoring/provisioning/datasources/prometheus.yaml \
  /usr/share/man/man1/$pkg.1.gz /usr/share/bash-completion/completions/$pkg \
  /usr/share/zsh/vendor-completions/_$pkg /usr/share/fish/vendor_completions.d/$pkg.fish; do
  [[ -f $f ]] || fail "$f is not installed"
done
step "files installed (units in $unitdir)"

# The units, as systemd would load them from the package.
for unit in $pkg.service $pkg@sglang-decode.service; do
  out=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify $unit: $out"
  [[ -z $out ]] || fail "systemd-analyze verify $unit warns: $out"
  sec=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1) ||
    fail "systemd-analyze security $unit: $sec"
  score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$sec")
  [[ -n $score ]] || fail "no exposure score for $unit: $sec"
  awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "$unit: exposure $score > 2.0"
  step "$unit: verify clean, exposure $score"
done

# The installed binary on the shipped sample: the capacity and a rank's last busy state.
rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
version=$(/usr/bin/$pkg --version)
[[ $version == "$pkg "*" ($rev)" ]] || fail "--version says '$version', want the revision $rev"
sample=/usr/share/$pkg/examples/pd-decode-session.log
expo=$(/usr/bin/$pkg --once --gpu.disable --timezone UTC "$sample" 2>"$err")
grep -q '^sglang:max_total_num_tokens{server="pd-decode-session",.*dp_rank="0".*} 786432$' <<<"$expo" ||
  fail "the exposition of $sample lacks sglang:max_total_num_tokens 786432"
grep -q "^sglang_log_exporter_build_info{.*revision=\"$rev\"," <<<"$expo" ||
  fail "build_info does not name revision $rev"
grep -q 'DP0 TP0  idle since 10:17:36: KV cache 0.0% (0/786432 tokens), 0 running, 0 queued; last busy: KV cache 0.3% (2290/786432 tokens), 1 running, 0 queued' "$err" ||
  fail "no KV summary on stderr: $(cat "$err")"
expo2=$(/usr/bin/$pkg --once --gpu.disable --timezone UTC --log.level warn \
  --patterns /usr/share/$pkg/patterns/sglang.yaml "$sample" 2>"$err")
[[ $expo2 == "$expo" ]] || fail "the shipped pattern file reads the sample differently"
[[ ! -s $err ]] || fail "--log.level warn still wrote to stderr: $(cat "$err")"
step "/usr/bin/$pkg $version reads the shipped sample (and patterns)"

# Man pages and completions.
if command -v man >/dev/null; then
  [[ $(man -w $pkg) == /usr/share/man/man1/$pkg.1.gz ]] || fail "man -w $pkg: $(man -w $pkg 2>&1)"
fi
zcat /usr/share/man/man1/$pkg.1.gz | grep -q 'web.listen\\-address' || fail "man page lacks the options"
for sub in check backfill; do
  [[ -f /usr/share/man/man1/$pkg-$sub.1.gz ]] || fail "no man page for $sub"
done
bash -c "source /usr/share/bash-completion/completions/$pkg && complete -p $pkg" >/dev/null ||
  fail "the bash completion does not load"
step "man pages and completions in place"

# The conffile: kept across a reinstall and a removal, deleted by purge.
dpkg-query -W -f='${Conffiles}\n' $pkg | grep -q "/etc/default/$pkg " ||
  fail "/etc/default/$pkg is not a conffile"
echo 'COMMON_ARGS="--gpu.disable"  # check-deb' >>/etc/default/$pkg
dpkg -i "$deb" >/dev/null
grep -q 'check-deb' /etc/default/$pkg || fail "a reinstall overwrote the edited conffile"
files=$(dpkg -L $pkg)
dpkg --remove $pkg >/dev/null
grep -q 'check-deb' /etc/default/$pkg || fail "dpkg --remove deleted the conffile"
step "conffile /etc/default/$pkg kept across reinstall and remove"

# Purge: nothing left.
dpkg --purge $pkg >/dev/null
if dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q 'ok installed\|config-files'; then
  fail "$pkg is still known to dpkg after purge"
fi
left=()
while IFS= read -r f; do
  [[ -n $f && $f != /. && ! -d $f && -e $f ]] && left+=("$f")
done <<<"$files"
for d in /usr/share/$pkg /usr/share/doc/$pkg /etc/default/$pkg; do
  [[ -e $d ]] && left+=("$d")
done
((${#left[@]} == 0)) || fail "left after purge: ${left[*]}"
step "purged: nothing left"
echo "check-deb: OK"
