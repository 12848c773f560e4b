//! `sluice generate man|completions SHELL`: the sluice(8) page and the
//! shell completions, written from the clap definition itself (as ripgrep's
//! `--generate` does), so packaging needs no tool beyond the binary.
//!
//! # Principles
//! - One source of truth: every command, option, default and help text on
//!   the page and in the completions is clap's, so they cannot drift from
//!   what the binary accepts. Hidden commands stay hidden.
//! - One page for the whole tool, as for pfctl(8): the top-level synopsis,
//!   then a subsection per command with its synopsis, description and
//!   options, then the sections clap does not know (exit status, files,
//!   environment, see also), written here.
//! - Output goes to stdout; a failed write is an error (exit 1), never a
//!   truncated page passed off as complete.

use clap::{Args as ClapArgs, CommandFactory, Subcommand, ValueEnum};
use std::io::Write;
use std::process::ExitCode;

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// The sluice(8) man page (roff) on stdout.
    Man,
    /// Completions for SHELL on stdout.
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

pub fn run<C: CommandFactory>(a: Args) -> ExitCode {
    let cmd = C::command();
    let mut out = Vec::new();
    let written = match a.what {
        What::Man => man(cmd, &mut out),
        What::Completions { shell } => {
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            let mut cmd = cmd;
            clap_complete::generate(shell, &mut cmd, "sluice", &mut out);
            Ok(())
        }
    };
    let mut stdout = std::io::stdout().lock();
    match written.and_then(|()| stdout.write_all(&out).and_then(|()| stdout.flush())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::out::ewriteln!("error: sluice generate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The whole sluice(8) page.
fn man(cmd: clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let version = cmd.get_version().unwrap_or_default().to_string();
    let page = clap_mangen::Man::new(cmd.clone())
        .title("SLUICE")
        .section("8")
        .source(format!("sluice {version}"))
        .manual("System Administration");
    page.render_title(w)?;
    page.render_name_section(w)?;
    page.render_synopsis_section(w)?;
    w.write_all(DESCRIPTION.as_bytes())?;
    w.write_all(b".SH COMMANDS\n")?;
    commands(&cmd, "sluice", w)?;
    w.write_all(TAIL.as_bytes())
}

/// A subsection per visible command (nested ones as `sluice show queues`).
fn commands(parent: &clap::Command, path: &str, w: &mut dyn Write) -> std::io::Result<()> {
    for sub in parent.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{path} {}", sub.get_name());
        writeln!(w, ".SS \"{name}\"")?;
        let page = clap_mangen::Man::new(sub.clone().bin_name(&name));
        for render in [
            clap_mangen::Man::render_synopsis_section,
            clap_mangen::Man::render_description_section,
            clap_mangen::Man::render_options_section,
        ] {
            let mut buf = Vec::new();
            render(&page, &mut buf)?;
            w.write_all(&demoted(&buf))?;
        }
        commands(sub, &name, w)?;
    }
    Ok(())
}

/// A rendered section with its `.SH` heading replaced by a paragraph
/// break (they are subsections of COMMANDS here); `OPTIONS` becomes a
/// paragraph label.
fn demoted(roff: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(roff);
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_prefix(".SH ") {
            Some("OPTIONS") => out.push_str(".PP\n\\fIOptions:\\fR\n"),
            Some(_) => out.push_str(".PP\n"),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out.into_bytes()
}

const DESCRIPTION: &str = r#".SH DESCRIPTION
\fBsluice\fR is a userspace traffic shaper for a Linux bridge: it forwards
every frame between two interfaces (\fBrun \-\-bridge\fR \fILAN,WAN\fR) and
shapes, queues and filters them with the queueing language of OpenBSD's
pf.conf (HFSC, PRIQ, CBQ, FQ\-CoDel; see \fBsluice.conf\fR(5)).
The daemon is steered through a control socket, as \fBpfctl\fR(8) steers pf:
\fBcheck\fR (pfctl \-nf), \fBreload\fR (pfctl \-f), \fBshow\fR (pfctl \-s),
\fBstop\fR.
.PP
Under systemd the daemon runs as the \fBsluice\fR system user from
\fIsluice.service\fR, which checks the configuration before each start,
reports readiness once the ports are open and the first configuration is
live, and is restarted by the watchdog if its packet loop stops turning.
"#;

const TAIL: &str = r#".SH EXIT STATUS
.TP
\fB0\fR
Success: the files check (warnings do not change the status), the daemon
stopped cleanly, the reload was applied.
.TP
\fB1\fR
Failure: a configuration was refused (its diagnostics are on standard
error), the daemon could not be reached or could not start, the packet
loop failed.
.TP
\fB2\fR
Usage error: an unknown command or option, a missing or malformed argument.
.SH FILES
.TP
\fI/etc/sluice/pf.conf\fR
The configuration the service loads (\fBsluice.conf\fR(5)).
.TP
\fI/etc/default/sluice\fR
The service's settings: the bridged interfaces (\fBSLUICE_LAN\fR,
\fBSLUICE_WAN\fR) and what the LAN does while sluice is not running
(\fBSLUICE_ON_EXIT\fR: \fBdown\fR or \fBbridge\fR).
.TP
\fI/run/sluice/sluice.sock\fR
The control socket (\fB\-\-control\fR), for root and the daemon's user.
.TP
\fI/lib/systemd/system/sluice.service\fR
The systemd unit.
.TP
\fI/usr/share/doc/sluice/\fR
The documentation and the example configurations.
.SH ENVIRONMENT
.TP
\fBNOTIFY_SOCKET\fR, \fBWATCHDOG_USEC\fR, \fBWATCHDOG_PID\fR
Set by systemd for \fBType=notify\fR: \fBrun\fR sends READY=1 once it
forwards, WATCHDOG=1 from its packet loop, STOPPING=1 when it ends.
.TP
\fBJOURNAL_STREAM\fR
When it names standard error, log lines and the diagnostics of
\fBcheck\fR and \fBreload\fR carry syslog priorities (<3> error, <4> warning, <6> info, <7> debug) for \fBjournalctl \-p\fR.
.SH EXAMPLES
Check a file as the service will load it, then apply it to the running
daemon:
.PP
.nf
.RS
sluice check \-D int_if=lan0 \-D ext_if=wan0 /etc/sluice/pf.conf
systemctl reload sluice
sluice show queues \-v
.RE
.fi
.SH SEE ALSO
\fBsluice.conf\fR(5), \fBsystemctl\fR(1), \fBjournalctl\fR(1),
\fBpf.conf\fR(5) and \fBpfctl\fR(8) on OpenBSD, \fBtc\fR(8),
\fI/usr/share/doc/sluice/\fR.
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demoting_drops_headings_and_labels_the_options() {
        let got = demoted(b".SH SYNOPSIS\n\\fBsluice check\\fR\n.SH OPTIONS\n.TP\n-v\n");
        assert_eq!(
            String::from_utf8(got).unwrap(),
            ".PP\n\\fBsluice check\\fR\n.PP\n\\fIOptions:\\fR\n.TP\n-v\n"
        );
    }
}
