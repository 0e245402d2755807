//! `shardlog users`: SCRAM credentials in a data directory, offline (the
//! first user, as Kafka's `kafka-storage format --add-scram`). A running
//! broker holds the directory's lock; its users change through
//! AlterUserScramCredentials instead.

use std::path::{Path, PathBuf};

use crate::security::{
    credentials::{random_bytes, Credentials, SALT_BYTES},
    scram::{Mechanism, ScramCredential, ITERATIONS_MAX, ITERATIONS_MIN},
};

#[derive(clap::Subcommand, Debug)]
pub enum UsersCommand {
    /// Add a user's SCRAM credential (or replace it).
    Add {
        #[arg(long)]
        data_dir: PathBuf,
        /// SCRAM-SHA-256 or SCRAM-SHA-512 (repeat for both).
        #[arg(long, required = true)]
        mechanism: Vec<String>,
        #[arg(long)]
        user: String,
        /// A file holding the password (one trailing newline is dropped).
        #[arg(long, conflicts_with = "password", required_unless_present = "password")]
        password_file: Option<PathBuf>,
        #[arg(long)]
        password: Option<String>,
        #[arg(long, default_value_t = ITERATIONS_MIN)]
        iterations: u32,
    },
    /// List users and their mechanisms (never a key or salt).
    List {
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Delete a user's credentials (all mechanisms unless one is named).
    Delete {
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long)]
        user: String,
        #[arg(long)]
        mechanism: Option<String>,
    },
}

pub fn run(cmd: UsersCommand) -> Result<(), String> {
    match cmd {
        UsersCommand::Add { data_dir, mechanism, user, password_file, password, iterations } => {
            let password = match (password_file, password) {
                (Some(f), _) => {
                    let text = std::fs::read_to_string(&f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
                    text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text).to_string()
                }
                (None, Some(p)) => p,
                (None, None) => return Err("give --password-file or --password".into()),
            };
            if password.is_empty() {
                return Err("the password is empty".into());
            }
            if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
                return Err(format!("--iterations {iterations}: must be {ITERATIONS_MIN}..={ITERATIONS_MAX}"));
            }
            let mechanisms = mechanism.iter().map(|m| parse_mechanism(m)).collect::<Result<Vec<_>, _>>()?;
            change(&data_dir, |c| {
                for m in &mechanisms {
                    let salt = random_bytes(SALT_BYTES)?;
                    let credential = ScramCredential::from_password(*m, password.as_bytes(), &salt, iterations);
                    c.upsert(&user, *m, credential).map_err(|r| format!("user {user:?}: refused ({r:?})"))?;
                    println!("added {} credential for user {user:?} ({iterations} iterations)", m.name());
                }
                Ok(())
            })
        }
        UsersCommand::List { data_dir } => {
            let c = Credentials::load(&data_dir)?;
            for (user, mechanisms) in c.users() {
                let list: Vec<String> =
                    mechanisms.iter().map(|(m, c)| format!("{}(iterations={})", m.name(), c.iterations)).collect();
                println!("{user}\t{}", list.join(" "));
            }
            Ok(())
        }
        UsersCommand::Delete { data_dir, user, mechanism } => {
            let named = mechanism.as_deref().map(parse_mechanism).transpose()?;
            change(&data_dir, |c| {
                let mechanisms: Vec<Mechanism> = match named {
                    Some(m) => vec![m],
                    None => c.of_user(&user).map(|m| m.keys().copied().collect()).unwrap_or_default(),
                };
                if mechanisms.is_empty() {
                    return Err(format!("user {user:?} has no credentials"));
                }
                for m in mechanisms {
                    c.delete(&user, m).map_err(|_| format!("user {user:?} has no {} credential", m.name()))?;
                    println!("deleted {} credential of user {user:?}", m.name());
                }
                Ok(())
            })
        }
    }
}

fn parse_mechanism(name: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(name).ok_or_else(|| format!("--mechanism {name:?}: expected SCRAM-SHA-256 or SCRAM-SHA-512"))
}

/// Loads, changes and saves the credentials under the data directory's
/// lock, refusing while a broker runs there.
fn change(data_dir: &Path, f: impl FnOnce(&mut Credentials) -> Result<(), String>) -> Result<(), String> {
    std::fs::create_dir_all(data_dir).map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
    let lock_path = data_dir.join(".lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    lock.try_lock().map_err(|_| {
        format!(
            "{} is in use by a running broker: change users with AlterUserScramCredentials \
             (e.g. an admin client) instead",
            data_dir.display()
        )
    })?;
    let mut credentials = Credentials::load(data_dir)?;
    f(&mut credentials)?;
    credentials.save(data_dir)
}
