package crashloop

// Internals for the external tests (package crashloop_test): the reference
// models of fuzz_test.go keep one clock per shard, as the keyed objects do,
// and need to know which shard holds a key. Which shard that is, is not
// logic the models check.

// ShardCount is the number of shards of a keyed object.
const ShardCount = shardCount

// BudgetShard returns the shard of b that holds key.
func BudgetShard(b *RespawnBudget, key string) int {
	i, _ := place(b.keys.hash, key)
	return i
}

// ChainShard returns the shard of d that holds key.
func ChainShard(d *ChainDetector, key string) int {
	i, _ := place(d.keys.hash, key)
	return i
}
