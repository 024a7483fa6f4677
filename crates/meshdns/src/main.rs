//! `meshdns`: discovery DNS for overlay networks on Kubernetes.
//!
//! This binary only wires things together: the command line ([`cli`]) and configuration
//! ([`config`]), then per command the file sources (`meshdns-sources`), the DNS server
//! (`meshdns-server`), the planners and the controllers.

mod check;
mod cli;
mod config;
mod controller_cmd;
mod pkarr_http;
mod render;
mod render_mesh;
mod serve;
mod telemetry;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command, ControllerTarget, RenderTarget};
use crate::config::defaults;
use crate::config::values::LogFormat;
use crate::serve::{EXIT_REFUSED, Refused, ServePlan};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (what, result) = match cli.command {
        Command::Serve(cmd) => match plan_serve(cmd) {
            Ok((settings, plan)) => ("serve", serve(&settings, plan)),
            Err(refused) => return refuse("serve", &refused),
        },
        Command::Check(cmd) if cmd.config_only => {
            return match check::config(&cmd) {
                Ok(()) => ExitCode::SUCCESS,
                Err(refused) => refuse("check", &refused),
            };
        }
        Command::Check(cmd) => {
            // The same refusals as `serve`'s, before any file is read.
            let resolved = cmd.resolve().map_err(|e| Refused::one(&e));
            let settings = match resolved.and_then(|s| serve::plan::resolve(&s).map(|_| s)) {
                Ok(settings) => settings,
                Err(refused) => return refuse("check", &refused),
            };
            return match check::check(&settings) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("meshdns check: {e:#}");
                    ExitCode::from(EXIT_REFUSED)
                }
            };
        }
        Command::Render(RenderTarget::Iroh(cmd)) => ("render iroh", render::iroh(&cmd).map(print)),
        Command::Render(RenderTarget::Zone(cmd)) => ("render zone", render::zone(&cmd).map(print)),
        Command::Render(RenderTarget::Status(cmd)) => {
            ("render status", render::status(&cmd).map(print))
        }
        Command::Render(RenderTarget::Mesh(cmd)) => {
            ("render mesh", render_mesh::render_mesh(&cmd.dir).map(print))
        }
        Command::Controller(target) => ("controller", run_controller(target)),
        Command::Crds => {
            print(meshdns_objects::crds());
            ("crds", Ok(()))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meshdns {what}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn print(text: impl std::fmt::Display) {
    print!("{text}");
}

fn init_logging(level: Option<&str>, format: Option<LogFormat>) {
    let level = level.unwrap_or(defaults::LOG_LEVEL);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format.unwrap_or(defaults::LOG_FORMAT) {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

/// `serve`'s settings (flags over the file) and its plan, or why it cannot start.
fn plan_serve(cmd: cli::ServeCmd) -> Result<(config::ServeConfig, ServePlan), Refused> {
    let settings = cmd.resolve().map_err(|e| Refused::one(&e))?;
    let plan = serve::plan::resolve(&settings)?;
    Ok((settings, plan))
}

/// Prints why the configuration is refused; the exit status says so.
fn refuse(what: &str, refused: &Refused) -> ExitCode {
    eprintln!("meshdns {what}: {refused}");
    ExitCode::from(EXIT_REFUSED)
}

fn serve(settings: &config::ServeConfig, plan: ServePlan) -> Result<()> {
    init_logging(settings.log_level.as_deref(), settings.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.workers)
        .thread_name("meshdns-worker")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(serve::run(plan));
    // `run` has waited out --shutdown-grace: what is still running (a blocking read, a
    // connection that never drained) is not waited for again.
    runtime.shutdown_background();
    result
}

/// Waits for SIGTERM or SIGINT.
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            error!("cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await;
            unreachable!()
        }
    };
    tokio::select! {
        _ = term.recv() => info!(signal = "SIGTERM", "signal received"),
        _ = int.recv() => info!(signal = "SIGINT", "signal received"),
    }
}

fn run_controller(target: ControllerTarget) -> Result<()> {
    let process = match &target {
        ControllerTarget::Iroh(cmd) => &cmd.process,
        ControllerTarget::Mesh(cmd) => &cmd.process,
    };
    init_logging(process.log_level.as_deref(), Some(process.log_format()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let signal = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            signal.cancel();
        });
        match &target {
            ControllerTarget::Iroh(cmd) => controller_cmd::run_iroh(cmd, shutdown).await,
            ControllerTarget::Mesh(cmd) => controller_cmd::run_mesh(cmd, shutdown).await,
        }
    })?;
    info!("stopped");
    Ok(())
}
