//! Size limits of the store. Every one is checked before anything is allocated or locked.

/// Longest key: what the log's key length field holds. Keys are hashed and compared on
/// every access and travel in every read set, so long keys cost; Redis clients and
/// Redis's own tests use keys of tens of kilobytes now and then (Redis takes up to
/// 512 MB), so the bound is the format's, not a guess at what is enough.
pub const MAX_KEY_BYTES: usize = 65_535;

/// Largest value written as bytes: Redis's `proto-max-bulk-len`, so what a Redis client
/// may set, a storage function may too. A commit's record must also fit the log's record
/// limit, and a value read over the ferry protocol its frame limit: past those the write
/// or read is refused with an error that names them.
pub const MAX_VALUE_BYTES: usize = 512 * 1024 * 1024;

/// Longest table name. Names travel in every request; short names keep frames small.
pub const MAX_TABLE_NAME_BYTES: usize = 128;

/// Most tables one tenant may create. Tables are created implicitly by a put, so a buggy
/// client looping over table names must hit a wall, not exhaust the node.
pub const MAX_TABLES_PER_TENANT: usize = 1024;

/// Default memory quota of a tenant (keys + values + per-object overhead), when the
/// configuration does not set one: room for several tenants on the 24 GiB machines ferry is measured on.
pub const DEFAULT_TENANT_QUOTA_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Bookkeeping bytes charged per object on top of its key and value (hash-map slot,
/// version, reference-counted buffers), so a quota cannot be dodged with empty values.
pub const OBJECT_OVERHEAD_BYTES: u64 = 64;

/// Lock shards per table. More shards let more cores write one table concurrently; 64 is
/// well above the core counts this node runs on while costing little per table.
pub const SHARDS_PER_TABLE: usize = 64;

/// Most distinct objects one transaction (read set + write set) may touch; matches the
/// protocol's per-message item limit.
pub const MAX_TX_OBJECTS: usize = 8192;
