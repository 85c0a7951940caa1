//! The on-disk formats that `jobprof-record` writes and `jobprof` reads:
//! capture metadata and the shard manifest. Dependency-free so that the
//! capture-side binary stays tiny.
