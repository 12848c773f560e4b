//! The Debian package (`scripts/package.sh`), built and checked as a user
//! and lintian would: its contents and control fields, the conffiles, the
//! man pages rendered by `man`, lintian, and an install and purge into a
//! scratch root, with `systemd-analyze verify` on the unit as installed.
//!
//! # Principles
//! - The package is built once per test process by the script itself (it
//!   reuses an up-to-date `target/deb/sluice`, or `SLUICE_DEB_BIN`), so
//!   what is tested is what `./scripts/package.sh && dpkg -i` installs.
//! - Nothing touches the host: the install goes into a fresh directory
//!   with `dpkg --root` and `--force-script-chrootless` (the maintainer
//!   scripts see `$DPKG_ROOT` and act only under it); the directory is
//!   removed on every exit path, a panic included. The host's own user
//!   database is compared before and after.
//! - Tools missing (dpkg-deb, lintian, man, systemd-analyze) make the test
//!   SKIP, and fail under `SLUICE_REQUIRE_NETNS=1` (scripts/test.sh sets it
//!   under CI and as root): scripts/setup.sh installs them.

use sluice_testkit::require_root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const TOOLS: &[&str] = &[
    "dpkg",
    "dpkg-deb",
    "dpkg-shlibdeps",
    "lintian",
    "man",
    "systemd-analyze",
    "systemctl",
];

/// Every file the package must install (directories aside).
const FILES: &[&str] = &[
    "./usr/sbin/sluice",
    "./lib/systemd/system/sluice.service",
    "./usr/lib/sysusers.d/sluice.conf",
    "./etc/sluice/pf.conf",
    "./etc/default/sluice",
    "./usr/share/man/man8/sluice.8.gz",
    "./usr/share/man/man5/sluice.conf.5.gz",
    "./usr/share/bash-completion/completions/sluice",
    "./usr/share/zsh/vendor-completions/_sluice",
    "./usr/share/fish/vendor_completions.d/sluice.fish",
    "./usr/share/doc/sluice/copyright",
    "./usr/share/doc/sluice/changelog.Debian.gz",
    "./usr/share/doc/sluice/install.md.gz",
    "./usr/share/doc/sluice/config.md.gz",
    "./usr/share/doc/sluice/examples/openbsd-fqcodel.conf",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The package, built once by scripts/package.sh.
fn deb() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        let out = run(Command::new(repo().join("scripts/package.sh")).current_dir(repo()));
        let path = text(&out.stdout).lines().last().unwrap_or("").to_string();
        let deb = repo().join(path.trim());
        let name = deb.file_name().unwrap_or_default().to_string_lossy();
        assert!(
            name.starts_with("sluice_") && name.ends_with(".deb") && deb.exists(),
            "package.sh printed {path:?}"
        );
        deb
    })
}

/// A directory removed when dropped, a panic included.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("sluice-pkg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_package_holds_the_daemon_its_unit_docs_and_conffiles_and_lints_clean() {
    if !require_root(TOOLS) {
        return;
    }
    let deb = deb();
    let list = text(&run(Command::new("dpkg-deb").arg("-c").arg(deb)).stdout);
    for f in FILES {
        assert!(
            list.lines().any(|l| l.ends_with(&format!(" {f}"))),
            "{f} missing from the package:\n{list}"
        );
    }
    for l in list.lines() {
        assert!(l.contains(" root/root "), "not owned by root: {l}");
        assert!(
            !l.contains("/usr/local/") && !l.contains("/lab/traces"),
            "outside the package's paths: {l}"
        );
    }
    let field = |f: &str| {
        text(&run(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg(f)).stdout)
            .trim()
            .to_string()
    };
    assert_eq!(field("Package"), "sluice");
    let depends = field("Depends");
    for dep in depends.split(',') {
        let name = dep.split_whitespace().next().unwrap_or("");
        assert!(
            ["libc6", "libgcc-s1"].contains(&name),
            "Depends: {depends}: the daemon needs only libc (the lab's tools stay out)"
        );
    }
    let conffiles = text(&run(Command::new("dpkg-deb").arg("-I").arg(deb).arg("conffiles")).stdout);
    let mut cf: Vec<&str> = conffiles.lines().map(str::trim).collect();
    cf.sort();
    assert_eq!(cf, ["/etc/default/sluice", "/etc/sluice/pf.conf"]);

    let x = Scratch::new("x");
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&x.0));
    // The router binary: no lab, and the shipped pf.conf checks clean.
    let bin = x.0.join("usr/sbin/sluice");
    let lab = Command::new(&bin)
        .args(["lab", "--help"])
        .output()
        .expect("sluice lab");
    assert_eq!(
        lab.status.code(),
        Some(2),
        "the package's sluice has no lab: {lab:?}"
    );
    // As the unit checks it (its -D win over the file's macros) and alone.
    for defines in [&["-D", "int_if=lan0", "-D", "ext_if=wan0"][..], &[]] {
        let check = run(Command::new(&bin)
            .arg("check")
            .args(defines)
            .arg(x.0.join("etc/sluice/pf.conf")));
        assert!(
            check.stderr.is_empty() && check.stdout.is_empty(),
            "/etc/sluice/pf.conf checks with no warning ({defines:?}): {}",
            text(&check.stderr)
        );
    }
    for (page, must) in [
        (
            "usr/share/man/man8/sluice.8.gz",
            ["sluice check", "EXIT STATUS", "sluice.conf(5)"],
        ),
        (
            "usr/share/man/man5/sluice.conf.5.gz",
            ["set overhead on", "fq_codel", "sluice(8)"],
        ),
    ] {
        let out = run(Command::new("man")
            .args(["-l", "--warnings=w", "-P", "cat"])
            .env("MANWIDTH", "80")
            .arg(x.0.join(page)));
        assert!(
            out.stderr.is_empty(),
            "{page}: man warns:\n{}",
            text(&out.stderr)
        );
        let shown = text(&out.stdout);
        for m in must {
            assert!(shown.contains(m), "{page} does not show `{m}`");
        }
    }

    let lint = Command::new("lintian")
        .args(["--fail-on", "error,warning"])
        .arg(deb)
        .output()
        .expect("lintian");
    let said = text(&lint.stdout);
    eprintln!(
        "package: lintian: {}",
        if said.trim().is_empty() {
            "clean"
        } else {
            said.trim()
        }
    );
    assert!(
        lint.status.success()
            && !said
                .lines()
                .any(|l| l.starts_with("E:") || l.starts_with("W:")),
        "lintian:\n{said}{}",
        text(&lint.stderr)
    );
}

/// `dpkg --root R` with the maintainer scripts run outside a chroot.
fn dpkg(root: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("dpkg");
    cmd.arg(format!("--root={}", root.display()))
        .args([
            "--force-script-chrootless",
            "--force-depends",
            "--log=/dev/null",
        ])
        .args(args);
    run(&mut cmd)
}

fn host_has_user(name: &str) -> bool {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(':').next() == Some(name))
}

#[test]
fn install_verify_and_purge_in_a_scratch_root() {
    if !require_root(TOOLS) {
        return;
    }
    let deb = deb();
    let user_before = host_has_user("sluice");
    let r = Scratch::new("root");
    let root = &r.0;
    for d in ["var/lib/dpkg/updates", "var/lib/dpkg/info"] {
        std::fs::create_dir_all(root.join(d)).expect("dpkg dirs");
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").expect("status");
    dpkg(root, &["-i", &deb.display().to_string()]);

    for f in FILES {
        assert!(root.join(f).exists(), "{f} not installed");
    }
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap_or_default();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("sluice:") && l.ends_with(":/usr/sbin/nologin")),
        "the postinst made the system user in the root:\n{passwd}"
    );
    assert_eq!(
        host_has_user("sluice"),
        user_before,
        "the host's users are untouched"
    );
    let v = run(Command::new(root.join("usr/sbin/sluice")).arg("--version"));
    assert!(text(&v.stdout).starts_with("sluice "), "{v:?}");
    let comp = run(Command::new("bash").arg("-c").arg(format!(
        "source {}; complete -p sluice",
        root.join("usr/share/bash-completion/completions/sluice")
            .display()
    )));
    assert!(text(&comp.stdout).contains("sluice"), "{comp:?}");

    // systemd-analyze verify on the unit as installed: the root gets the
    // host's targets (what the unit orders itself against) and its man
    // pages are looked up in the root (Documentation=).
    let units = root.join("lib/systemd/system");
    for e in std::fs::read_dir("/lib/systemd/system").expect("host units") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "target" || x == "slice") {
            std::fs::copy(&p, units.join(p.file_name().expect("name"))).expect("copy target");
        }
    }
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .arg("sluice.service")
        .env("MANPATH", root.join("usr/share/man"))
        .output()
        .expect("systemd-analyze");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify: {:?}\n{}",
        verify.status,
        text(&verify.stderr)
    );

    // `systemctl enable` as an admin runs it (offline, against the root:
    // `cat` has no --root): [Install] wants it from multi-user.target.
    let ctl = |verb: &str| {
        run(Command::new("systemctl")
            .arg(format!("--root={}", root.display()))
            .args([verb, "sluice.service"]))
    };
    ctl("enable");
    let wants = root.join("etc/systemd/system/multi-user.target.wants/sluice.service");
    assert!(wants.is_symlink(), "systemctl enable made no {wants:?}");
    assert_eq!(text(&ctl("is-enabled").stdout).trim(), "enabled");
    ctl("disable");
    assert!(!wants.is_symlink(), "systemctl disable left {wants:?}");

    // Purge: nothing of the package is left but its user (Debian keeps
    // system users); files the admin added to /etc/sluice go too.
    std::fs::write(root.join("etc/sluice/hosts.txt"), "192.0.2.1\n").expect("admin file");
    dpkg(root, &["--purge", "sluice"]);
    for f in FILES {
        assert!(!root.join(f).exists(), "{f} left after purge");
    }
    for d in ["etc/sluice", "usr/share/doc/sluice", "usr/lib/sysusers.d"] {
        assert!(!root.join(d).exists(), "{d} left after purge");
    }
    let status = std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap_or_default();
    assert!(
        !status.contains("Package: sluice"),
        "dpkg still lists sluice:\n{status}"
    );
    assert_eq!(
        host_has_user("sluice"),
        user_before,
        "the host's users are untouched"
    );
}
