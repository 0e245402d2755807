//! `shardlog tune check|apply`: the OS settings that matter for a
//! thread-per-core, direct-I/O broker on bare metal — checked against a
//! profile (`tuning/*.toml`) and, with `apply`, set where that can be
//! undone. `--root` points every read and write at another tree (tests
//! build a fake `/sys` and `/proc`).
//!
//! Exit codes: 0 everything as recommended (or not present here), 2 some
//! settings differ, 3 something blocks the broker (io_uring disabled), 1 the
//! tool itself failed.

pub mod checks;
pub mod profile;
mod threads;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use checks::{Finding, Host, Status};
use profile::Profile;

#[derive(Subcommand, Debug, Clone)]
pub enum TuneCommand {
    /// Compare the host with the profile; change nothing.
    Check(TuneArgs),
    /// Set what differs (only what can be undone), printing how to undo it.
    Apply(TuneArgs),
}

#[derive(Args, Debug, Clone)]
pub struct TuneArgs {
    /// A profile from tuning/ (default: the built-in default profile).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Read and write /sys, /proc and /etc under this directory instead of /.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// apply: print the exact commands (and their undo) without running them.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn exit_code(findings: &[Finding]) -> i32 {
    match findings.iter().map(|f| f.status).max() {
        Some(Status::Blocks) => 3,
        Some(Status::Tune | Status::Manual) => 2,
        _ => 0,
    }
}

/// Runs the command; returns the exit code.
pub fn run(cmd: TuneCommand) -> Result<i32, String> {
    let (apply, a) = match &cmd {
        TuneCommand::Check(a) => (false, a),
        TuneCommand::Apply(a) => (true, a),
    };
    let profile = match &a.profile {
        Some(p) => Profile::load(p)?,
        None => Profile::default(),
    };
    let host = Host::new(&a.root);
    let findings = checks::check_all(&host, &profile)?;
    if !apply {
        print_findings(&findings, a.json)?;
        return Ok(exit_code(&findings));
    }
    // One limits.d file serves two findings: each change once.
    let mut changes: Vec<&checks::Change> = Vec::new();
    for c in findings.iter().filter(|f| matches!(f.status, Status::Tune | Status::Blocks)).flat_map(|f| &f.changes) {
        if !changes.contains(&c) {
            changes.push(c);
        }
    }
    if a.dry_run {
        if a.json {
            let v = serde_json::json!({
                "dry_run": true,
                "findings": findings,
                "commands": changes.iter().map(|c| c.command()).collect::<Vec<_>>(),
                "undo": changes.iter().map(|c| c.undo()).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
        } else {
            print_findings(&findings, false)?;
            println!("\n# would run ({} changes):", changes.len());
            for c in &changes {
                println!("{}", c.command());
            }
            println!("\n# to undo:");
            for c in &changes {
                println!("{}", c.undo());
            }
        }
        return Ok(exit_code(&findings));
    }
    let mut applied = Vec::new();
    let mut failed = Vec::new();
    for c in &changes {
        match c.apply() {
            Ok(()) => applied.push(*c),
            Err(e) => failed.push(format!("{}: {e}", c.command())),
        }
    }
    let after = checks::check_all(&host, &profile)?;
    if a.json {
        let v = serde_json::json!({
            "applied": applied.iter().map(|c| c.command()).collect::<Vec<_>>(),
            "undo": applied.iter().map(|c| c.undo()).collect::<Vec<_>>(),
            "failed": failed,
            "findings": after,
        });
        println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
    } else {
        for c in &applied {
            println!("applied: {}", c.command());
        }
        for f in &failed {
            println!("FAILED: {f}");
        }
        if !applied.is_empty() {
            println!("\n# these changes last until reboot (limits.d files until removed); to undo now:");
            for c in &applied {
                println!("{}", c.undo());
            }
        }
        println!();
        print_findings(&after, false)?;
    }
    Ok(if failed.is_empty() { exit_code(&after) } else { 1 })
}

fn print_findings(findings: &[Finding], json: bool) -> Result<(), String> {
    if json {
        println!("{}", serde_json::to_string_pretty(findings).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let w = |f: fn(&Finding) -> usize, title: &str| findings.iter().map(f).max().unwrap_or(0).max(title.len());
    let ws = w(|f| f.setting.chars().count(), "setting");
    let wc = w(|f| f.current.chars().count(), "current").min(44);
    let wr = w(|f| f.recommended.chars().count(), "recommended").min(44);
    println!("{:<ws$}  {:<wc$}  {:<wr$}  {:<6}  why", "setting", "current", "recommended", "status");
    for f in findings {
        println!(
            "{:<ws$}  {:<wc$}  {:<wr$}  {:<6}  {}",
            f.setting,
            clip(&f.current, wc),
            clip(&f.recommended, wr),
            f.status.label(),
            f.why
        );
    }
    let count = |s: Status| findings.iter().filter(|f| f.status == s).count();
    println!(
        "\n{} ok, {} to tune (apply can), {} manual, {} blocking, {} not present",
        count(Status::Ok),
        count(Status::Tune),
        count(Status::Manual),
        count(Status::Blocks),
        count(Status::Absent)
    );
    Ok(())
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        s.chars().take(width.saturating_sub(1)).collect::<String>() + "…"
    }
}
