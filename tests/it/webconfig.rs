//! `--web.config.file`: HTTPS and basic auth with real certificates from `openssl`.
