-- Credit leases (src/leases.rs): a usage row written in a lease's batch names the lease.
ALTER TABLE usage ADD COLUMN lease_id TEXT;
