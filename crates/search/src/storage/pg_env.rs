//! What a PostgreSQL client reads besides the URL, as libpq does: the password from `PGPASSWORD`
//! or the password file (`PGPASSFILE`, else `~/.pgpass`), and the TLS defaults `PGSSLMODE` and
//! `PGSSLROOTCERT`. So the password need not sit in the URL, where shell history and `ps` show it.

use std::fmt;
use std::path::{Path, PathBuf};

/// The client's environment, read once ([`PgEnv::from_process`]) so that tests can pass their own.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PgEnv {
    /// `PGPASSWORD`: the password when the URL has none (an empty one counts as unset).
    pub password: Option<String>,
    /// `PGPASSFILE`: the password file; without it, `.pgpass` in `home`.
    pub passfile: Option<PathBuf>,
    /// `PGSSLMODE`: the sslmode when the URL has none.
    pub sslmode: Option<String>,
    /// `PGSSLROOTCERT`: the CA file when the URL has no `sslrootcert`.
    pub sslrootcert: Option<PathBuf>,
    /// `HOME`: where `.pgpass` and `.postgresql/root.crt` are looked for.
    pub home: Option<PathBuf>,
}

/// The password never shows, not even in debug output.
impl fmt::Debug for PgEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgEnv")
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("passfile", &self.passfile)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("home", &self.home)
            .finish()
    }
}

impl PgEnv {
    /// The variables of this process.
    pub fn from_process() -> PgEnv {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        PgEnv {
            password: var("PGPASSWORD").map(|v| v.to_string_lossy().into_owned()),
            passfile: var("PGPASSFILE").map(PathBuf::from),
            sslmode: var("PGSSLMODE").map(|v| v.to_string_lossy().into_owned()),
            sslrootcert: var("PGSSLROOTCERT").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
        }
    }

    /// The password file: `PGPASSFILE`, else `~/.pgpass`.
    pub fn passfile_path(&self) -> Option<PathBuf> {
        self.passfile.clone().or_else(|| self.home.as_ref().map(|h| h.join(".pgpass")))
    }

    /// The default CA file of `verify-ca`/`verify-full`: `~/.postgresql/root.crt`.
    pub fn default_root_cert(&self) -> Option<PathBuf> {
        self.home.as_ref().map(|h| h.join(".postgresql").join("root.crt"))
    }
}

/// The connection a password is looked up for, as the password file's first four fields name it.
#[derive(Clone, Copy, Debug)]
pub struct PassKey<'a> {
    pub host: &'a str,
    pub port: u16,
    pub database: &'a str,
    pub user: &'a str,
}

/// Where a password came from, for the message of a failed login (never the password itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordSource {
    Url,
    Environment,
    File(PathBuf),
    None,
}

/// The password for `key` when the URL has none: `PGPASSWORD`, then the password file. The
/// warnings say why a password file was skipped (libpq prints the same ones).
pub fn lookup_password(env: &PgEnv, key: &PassKey<'_>) -> (Option<String>, PasswordSource, Vec<String>) {
    if let Some(p) = env.password.as_ref().filter(|p| !p.is_empty()) {
        return (Some(p.clone()), PasswordSource::Environment, Vec::new());
    }
    let Some(path) = env.passfile_path() else { return (None, PasswordSource::None, Vec::new()) };
    match read_passfile(&path) {
        Ok(Some(text)) => match find_password(&text, key) {
            Some(p) => (Some(p), PasswordSource::File(path), Vec::new()),
            None => (None, PasswordSource::None, Vec::new()),
        },
        Ok(None) => (None, PasswordSource::None, Vec::new()),
        Err(warning) => (None, PasswordSource::None, vec![warning]),
    }
}

/// The text of a password file; `None` when there is none, a warning when it must not be used:
/// not a plain file, or readable by the group or others (it should be `chmod 0600`).
fn read_passfile(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) => return Ok(None),
    };
    if !meta.is_file() {
        return Err(format!("password file {} is not a plain file; it is ignored", path.display()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "password file {} has group or world access; it is ignored (permissions should be u=rw, chmod 0600)",
                path.display()
            ));
        }
    }
    std::fs::read(path)
        .map(|b| Some(String::from_utf8_lossy(&b).into_owned()))
        .map_err(|e| format!("password file {} cannot be read ({e}); it is ignored", path.display()))
}

/// The password of the first line of a password file that matches `key`. Lines are
/// `host:port:database:user:password`; `*` alone matches anything in the first four fields; `\`
/// escapes `:` and `\`; lines starting with `#` and lines of fewer fields are skipped. The
/// host `localhost` also stands for a Unix socket, as in libpq.
pub fn find_password(text: &str, key: &PassKey<'_>) -> Option<String> {
    let host = if key.host.is_empty() || key.host.starts_with('/') { "localhost" } else { key.host };
    let port = key.port.to_string();
    let wanted = [host, port.as_str(), key.database, key.user];
    text.lines().map(|l| l.trim_end_matches('\r')).filter(|l| !l.starts_with('#')).find_map(|line| {
        let (fields, password) = split_line(line)?;
        let matches = fields.iter().zip(wanted).all(|(field, want)| match field {
            Field::Any => true,
            Field::Text(t) => t == want,
        });
        matches.then_some(password)
    })
}

/// One of the first four fields of a password file line.
#[derive(Debug, PartialEq, Eq)]
enum Field {
    /// `*`: matches anything.
    Any,
    /// The field with its escapes removed.
    Text(String),
}

/// A line's four key fields and its password, escapes removed; `None` for fewer than five fields.
/// The password ends at the next unescaped `:`, as libpq reads it.
fn split_line(line: &str) -> Option<([Field; 4], String)> {
    let mut parts: Vec<(String, bool)> = Vec::with_capacity(5);
    let mut current = String::new();
    let mut escaped_anything = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                escaped_anything = true;
                current.push(chars.next().unwrap_or('\\'));
            }
            ':' => {
                parts.push((std::mem::take(&mut current), escaped_anything));
                escaped_anything = false;
                if parts.len() == 5 {
                    break;
                }
            }
            _ => current.push(c),
        }
    }
    if parts.len() < 5 {
        parts.push((current, escaped_anything));
    }
    if parts.len() < 5 {
        return None;
    }
    let password = parts.pop()?.0;
    let field = |(text, escaped): (String, bool)| if text == "*" && !escaped { Field::Any } else { Field::Text(text) };
    let mut it = parts.into_iter().map(field);
    Some(([it.next()?, it.next()?, it.next()?, it.next()?], password))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: PassKey<'static> = PassKey { host: "db.lab", port: 5432, database: "mase", user: "alice" };

    /// One password file line and the password it gives for `KEY` (`None`: no match).
    fn check(cases: &[(&str, Option<&str>)]) {
        for (line, want) in cases {
            assert_eq!(find_password(line, &KEY).as_deref(), *want, "line {line:?}");
        }
    }

    #[test]
    fn password_file_lines_match_as_libpq_reads_them() {
        check(&[
            ("db.lab:5432:mase:alice:pw", Some("pw")),
            ("*:*:*:*:pw", Some("pw")),
            ("db.lab:*:mase:alice:pw", Some("pw")),
            ("db.lab:5433:mase:alice:pw", None),
            ("other:5432:mase:alice:pw", None),
            ("db.lab:5432:mase:bob:pw", None),
            ("db.lab:5432:other:alice:pw", None),
            // Escapes: `\:` and `\\` in the password; a password ends at an unescaped `:`.
            (r"db.lab:5432:mase:alice:p\:w\\x", Some(r"p:w\x")),
            ("db.lab:5432:mase:alice:pw:trailing", Some("pw")),
            // An escaped `*` is a literal star, not a wildcard.
            (r"\*:5432:mase:alice:pw", None),
            // `*x` is not a wildcard either.
            ("*x:5432:mase:alice:pw", None),
            // Empty password, comments, short lines.
            ("db.lab:5432:mase:alice:", Some("")),
            ("#db.lab:5432:mase:alice:pw", None),
            ("db.lab:5432:mase:alice", None),
            ("", None),
            // Windows line ends.
            ("db.lab:5432:mase:alice:pw\r", Some("pw")),
        ]);
    }

    #[test]
    fn the_first_matching_line_wins() {
        let text = "# a comment\nother:*:*:*:no\ndb.lab:*:*:alice:first\n*:*:*:*:second\n";
        assert_eq!(find_password(text, &KEY).as_deref(), Some("first"));
        let bob = PassKey { user: "bob", ..KEY };
        assert_eq!(find_password(text, &bob).as_deref(), Some("second"));
    }

    #[test]
    fn an_escaped_colon_in_a_key_field_matches_a_literal_colon() {
        let v6 = PassKey { host: "::1", ..KEY };
        assert_eq!(find_password(r"\:\:1:5432:mase:alice:pw", &v6).as_deref(), Some("pw"));
    }

    #[test]
    fn a_unix_socket_counts_as_localhost() {
        let socket = PassKey { host: "/var/run/postgresql", ..KEY };
        assert_eq!(find_password("localhost:5432:mase:alice:pw", &socket).as_deref(), Some("pw"));
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mase-pgenv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn pgpassword_comes_before_the_file_and_an_empty_one_counts_as_unset() {
        let dir = temp_dir("order");
        let file = dir.join("pass");
        std::fs::write(&file, "*:*:*:*:from-file\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let env = PgEnv { password: Some("from-env".into()), passfile: Some(file.clone()), ..PgEnv::default() };
        assert_eq!(lookup_password(&env, &KEY).0.as_deref(), Some("from-env"));
        let env = PgEnv { password: Some(String::new()), ..env };
        let (pw, source, warnings) = lookup_password(&env, &KEY);
        assert_eq!((pw.as_deref(), source, warnings), (Some("from-file"), PasswordSource::File(file), vec![]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_password_file_others_can_read_is_ignored_with_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("perm");
        let home_file = dir.join(".pgpass");
        std::fs::write(&home_file, "*:*:*:*:pw\n").unwrap();
        let env = PgEnv { home: Some(dir.clone()), ..PgEnv::default() };
        // (mode, password found, warning words)
        let cases: &[(u32, Option<&str>, &[&str])] = &[
            (0o600, Some("pw"), &[]),
            (0o400, Some("pw"), &[]),
            (0o640, None, &["group or world access", "0600"]),
            (0o604, None, &["group or world access"]),
        ];
        for (mode, want, words) in cases {
            std::fs::set_permissions(&home_file, std::fs::Permissions::from_mode(*mode)).unwrap();
            let (pw, _, warnings) = lookup_password(&env, &KEY);
            assert_eq!(pw.as_deref(), *want, "mode {mode:o}");
            assert_eq!(warnings.len(), usize::from(!words.is_empty()), "mode {mode:o}: {warnings:?}");
            for w in *words {
                assert!(warnings[0].contains(w) && warnings[0].contains(".pgpass"), "mode {mode:o}: {warnings:?}");
            }
        }
        // A folder in the file's place, and no file at all.
        let env = PgEnv { passfile: Some(dir.clone()), ..PgEnv::default() };
        let (pw, _, warnings) = lookup_password(&env, &KEY);
        assert!(pw.is_none() && warnings[0].contains("not a plain file"), "{warnings:?}");
        let env = PgEnv { passfile: Some(dir.join("absent")), ..PgEnv::default() };
        assert_eq!(lookup_password(&env, &KEY), (None, PasswordSource::None, vec![]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn debug_output_hides_the_password() {
        let env = PgEnv { password: Some("hunter2".into()), ..PgEnv::default() };
        assert!(!format!("{env:?}").contains("hunter2"));
    }
}
