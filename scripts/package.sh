#!/usr/bin/env bash
# Builds the Debian package: target/debian/sluice_<version>_<arch>.deb.
#
#   ./scripts/package.sh && dpkg -i target/debian/sluice_*.deb
#
# The daemon is built without the lab (`--no-default-features`, profile
# `deb`: release, no debug info, stripped) into target/deb/, so it never
# replaces the lab's target/release/sluice; cargo reuses a build that is up
# to date. SLUICE_DEB_BIN=PATH packages that binary instead (it must be a
# build without the lab). The man page sluice(8) and the completions come
# from the binary itself (`sluice generate`); sluice.conf(5) is
# docs/man/sluice.conf.5. Everything else is staged from contrib/ and
# packed with dpkg-deb: no tool beyond dpkg-dev (build-essential).
# DEBFULLNAME/DEBEMAIL set the maintainer; SOURCE_DATE_EPOCH (default: the
# last commit's time) the changelog's date and every file's mtime.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022

version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$version" ] || { echo "package: no version in Cargo.toml" >&2; exit 1; }
debversion="$version-1"
arch=$(dpkg --print-architecture)
maintainer="${DEBFULLNAME:-The sluice authors} <${DEBEMAIL:-sluice@example.org}>"
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

if [ -n "${SLUICE_DEB_BIN:-}" ]; then
    bin=$SLUICE_DEB_BIN
else
    cargo build --quiet --profile deb --no-default-features --bin sluice
    bin=target/deb/sluice
fi
if "$bin" lab --help >/dev/null 2>&1; then
    echo "package: $bin has the lab built in; build it with --no-default-features" >&2
    exit 1
fi

out=target/debian
stage=$out/stage
rm -rf "$stage"
mkdir -p "$stage/DEBIAN"
doc=$stage/usr/share/doc/sluice

install -D -m 0755 "$bin" "$stage/usr/sbin/sluice"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/sbin/sluice"
install -D -m 0644 contrib/sluice.service "$stage/lib/systemd/system/sluice.service"
install -D -m 0644 contrib/sluice.sysusers "$stage/usr/lib/sysusers.d/sluice.conf"
install -D -m 0644 contrib/pf.conf "$stage/etc/sluice/pf.conf"
install -D -m 0644 contrib/default "$stage/etc/default/sluice"
install -D -m 0644 contrib/debian/lintian-overrides "$stage/usr/share/lintian/overrides/sluice"

mkdir -p "$stage/usr/share/man/man8" "$stage/usr/share/man/man5"
"$bin" generate man | gzip -9n >"$stage/usr/share/man/man8/sluice.8.gz"
gzip -9n <docs/man/sluice.conf.5 >"$stage/usr/share/man/man5/sluice.conf.5.gz"
completions() { # SHELL DEST
    mkdir -p "$(dirname "$2")"
    "$bin" generate completions "$1" >"$2"
    chmod 0644 "$2"
}
completions bash "$stage/usr/share/bash-completion/completions/sluice"
completions zsh "$stage/usr/share/zsh/vendor-completions/_sluice"
completions fish "$stage/usr/share/fish/vendor_completions.d/sluice.fish"

# The user's and operator's documents; the lab's and the developers' stay
# in the source tree. Policy 12.3: files over 4 kB compressed.
mkdir -p "$doc/examples/lab"
for f in install config control dataplane autorate host-isolation tcp-control; do
    install -m 0644 "docs/$f.md" "$doc/$f.md"
done
install -m 0644 examples/*.conf "$doc/examples/"
install -m 0644 examples/lab/*.conf "$doc/examples/lab/"
find "$doc" -type f -size +4k -exec gzip -9n {} +

{
    cat <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: sluice
Comment: The binary links these Rust crates statically (name version
 license, as each crate declares it):
EOF
    cargo tree --quiet --offline -p sluice -e normal --no-default-features \
        --prefix none --no-dedupe -e no-proc-macro -f '{p} {l}' 2>/dev/null |
        sed 's| (/[^)]*)||' | sort -u | grep -v '^sluice' | sed 's/^/ /' || true
    cat <<EOF

Files: *
Copyright: 2026 the sluice authors
License: BSD-2-Clause

License: BSD-2-Clause
EOF
    sed -n '3,$p' LICENSE | sed 's/^$/./; s/^/ /'
} >"$doc/copyright"
chmod 0644 "$doc/copyright"

cat >"$out/changelog" <<EOF
sluice ($debversion) unstable; urgency=medium

  * Built from the sluice source tree by scripts/package.sh.

 -- $maintainer  $(date -u -R -d "@$epoch")
EOF
gzip -9n <"$out/changelog" >"$doc/changelog.Debian.gz"

# Runtime dependencies: what the binary links, as dpkg-shlibdeps reads it.
shl=$out/shlibs
rm -rf "$shl"
mkdir -p "$shl/debian"
printf 'Source: sluice\n\nPackage: sluice\nArchitecture: any\n' >"$shl/debian/control"
depends=$(cd "$shl" && dpkg-shlibdeps -O "$OLDPWD/$stage/usr/sbin/sluice" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

for s in postinst prerm postrm; do
    install -m 0755 "contrib/debian/$s" "$stage/DEBIAN/$s"
done
printf '/etc/default/sluice\n/etc/sluice/pf.conf\n' >"$stage/DEBIAN/conffiles"
chmod 0644 "$stage/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$debversion/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
    -e "s/@DEPENDS@/$depends/" -e "s/@MAINTAINER@/$maintainer/" \
    contrib/debian/control.in >"$stage/DEBIAN/control"
(cd "$stage" && find . -type f ! -path './DEBIAN/*' -printf '%P\n' | LC_ALL=C sort |
    xargs md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"
find "$stage" -exec touch --no-dereference -d "@$epoch" {} +

deb="$out/sluice_${debversion}_${arch}.deb"
rm -f "$out"/sluice_*.deb
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
