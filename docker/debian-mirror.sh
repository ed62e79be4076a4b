# Sourced by the image build scripts: the Debian mirror that debootstrap uses is the machine's own.
# Needs the caller's `log` function.

debian_mirror() {
    # The first "deb" URI of the machine's Debian sources (deb822 .sources files, then sources.list).
    local uri
    uri="$(awk '/^URIs:/ && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
    if [[ -z "$uri" && -r /etc/apt/sources.list ]]; then
        uri="$(awk '$1 == "deb" && $2 !~ /^\[/ && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list)"
    fi
    [[ -n "$uri" ]] || { log "no Debian mirror found in the apt sources; set AZR_DEBIAN_MIRROR"; exit 1; }
    printf '%s\n' "$uri"
}
