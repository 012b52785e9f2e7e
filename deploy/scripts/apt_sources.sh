# shellcheck shell=bash
# This machine's own apt sources, read for other uses: the deb-src entries the TSan Abseil build fetches
# its source from, the archive of another Debian release (a Debian 13 root made on Debian 12), and a
# minbase root of a release made from that archive. No archive host is written anywhere: everything comes
# from the machine's apt configuration.
# Sourced by ./convoy (which defines log, ROOT, RELEASE, KNOWN_RELEASES, JOBS and CLANG_VERSION); defines
# functions only.

# The deb-src counterparts of this machine's own apt sources, as deb822 stanzas on stdout: every `deb` entry of
# the given files (one-line *.list / sources.list, or deb822 *.sources) becomes `Types: deb-src` with the same
# URIs, suites, components and signed-by, so that a mirror or proxy the machine uses serves the source too.
# Disabled (`Enabled: no`) and deb-src-only entries are left out; missing files are skipped.
apt_deb_src_sources() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    case "$f" in
      *.sources)
        awk '
          function flush() {
            if (is_deb && enabled && body != "") { print "Types: deb-src"; printf "%s", body; print "" }
            is_deb = 0; enabled = 1; keep = 0; body = ""
          }
          BEGIN { enabled = 1 }
          /^#/ { next }
          /^[ \t]*$/ { flush(); next }
          /^[ \t]/ { if (keep) body = body $0 "\n"; next }
          {
            colon = index($0, ":")
            if (colon == 0) next
            key = tolower(substr($0, 1, colon - 1))
            value = substr($0, colon + 1)
            if (key == "types") { is_deb = (" " value " ") ~ /[ \t]deb[ \t]/; keep = 0; next }
            if (key == "enabled") { gsub(/[ \t]/, "", value); enabled = (tolower(value) != "no") }
            keep = 1; body = body $0 "\n"
          }
          END { flush() }' "$f"
        ;;
      *)
        awk '
          { sub(/#.*/, "") }
          $1 != "deb" { next }
          {
            line = $0
            sub(/^[ \t]*deb[ \t]+/, "", line)
            opts = ""
            if (substr(line, 1, 1) == "[") {
              close_at = index(line, "]")
              if (close_at == 0) next
              opts = substr(line, 2, close_at - 2)
              line = substr(line, close_at + 1)
            }
            sub(/^[ \t]+/, "", line)
            sub(/[ \t]+$/, "", line)
            n = split(line, word, /[ \t]+/)
            if (n < 2) next
            print "Types: deb-src"
            print "URIs: " word[1]
            print "Suites: " word[2]
            components = ""
            for (i = 3; i <= n; i++) components = components (i > 3 ? " " : "") word[i]
            if (components != "") print "Components: " components
            m = split(opts, opt, /[ \t]+/)
            for (i = 1; i <= m; i++) {
              eq = index(opt[i], "=")
              if (eq == 0) continue
              key = tolower(substr(opt[i], 1, eq - 1)); value = substr(opt[i], eq + 1)
              if (key == "signed-by") print "Signed-By: " value
              else if (key == "trusted") print "Trusted: " value
            }
            print ""
          }' "$f"
        ;;
    esac
  done
}

# The machine's own Debian archive entries, for another release: the deb822 stanzas of apt_deb_src_sources
# whose every suite is this machine's release or one of its -updates, -security or -backports suites, as
# `Types: deb` with the release renamed to $1. A Debian 13 root made on a Debian 12 machine gets its packages
# from the archive (mirror, proxy, keys) this machine already uses. $2...: the sources files.
apt_release_sources() {
  local target="$1"
  shift
  apt_deb_src_sources "$@" | awk -v from="$RELEASE" -v to="$target" '
    function flush() {
      if (body != "" && ours) printf "%s\n", body
      body = ""; ours = 1
    }
    BEGIN { ours = 1 }
    /^$/ { flush(); next }
    /^Types:/ { body = body "Types: deb\n"; next }
    /^Suites:/ {
      n = split(substr($0, 8), suite, /[ \t]+/)
      line = "Suites:"
      for (i = 1; i <= n; i++) {
        if (suite[i] == "") continue
        if (suite[i] !~ ("^" from "(-updates|-security|-backports)?$")) ours = 0
        sub("^" from, to, suite[i])
        line = line " " suite[i]
      }
      body = body line "\n"; next
    }
    { body = body $0 "\n" }
    END { flush() }'
}

# The URI of the first of apt_release_sources' stanzas that holds the release itself (not -updates or
# -security): the mirror debootstrap starts from.
apt_release_mirror() {
  awk -v release="$1" '
    /^URIs:/ { uri = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == release) { print uri; exit } }'
}

# A Debian root of release $1 as `debootstrap --variant=minbase` makes it, from the archive of this machine's own
# apt sources (apt_release_sources: the same mirror and keys), with those sources as its apt sources, written
# as the tarball $2 (an existing one is kept: it is a cache). Returns 3 where this machine's sources name no
# Debian archive for it, 4 where debootstrap fails (the archive unreachable?; its log's end on stderr).
make_minbase_tar() {
  local suite="$1" tarball="$2" list=/etc/apt/sources.list parts=/etc/apt/sources.list.d/ sources mirror root
  [ -f "$tarball" ] && return 0
  eval "$(apt-config shell list Dir::Etc::SourceList/f parts Dir::Etc::SourceParts/d)"
  sources="$(apt_release_sources "$suite" "$list" "$parts"*.list "$parts"*.sources)"
  mirror="$(apt_release_mirror "$suite" <<<"$sources")"
  [ -n "$mirror" ] || return 3
  mkdir -p "$(dirname "$tarball")"
  root="$(mktemp -d "$tarball.root.XXXXXX")"
  chmod 755 "$root"  # mktemp's 0700 would be the root's / in the tarball: no user but root could enter it.
  log "debootstrap --variant=minbase $suite from $mirror (once; kept as $tarball)"
  if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1; then
    tail -n 20 "$root.log" >&2
    rm -rf --one-file-system "$root" "$root.log"
    return 4
  fi
  printf '%s\n' "$sources" >"$root/etc/apt/sources.list.d/debian.sources"
  rm -f "$root/etc/apt/sources.list"
  tar -C "$root" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
  rm -rf --one-file-system "$root" "$root.log"
}
