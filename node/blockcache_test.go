package node

import "testing"

func TestBlockCacheFor_AShareOfMemoryWithinBounds(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		mem  int64
		ok   bool
		want int64
	}{
		{0, false, 8 * mib},          // unknown
		{256 * mib, true, 8 * mib},   // below the floor
		{512 * mib, true, 8 * mib},   // a 512 MiB Raspberry Pi
		{1024 * mib, true, 16 * mib}, // 1 GiB
		{2048 * mib, true, 32 * mib},
		{4096 * mib, true, 64 * mib},
		{24 << 30, true, 64 * mib}, // capped
	} {
		if got := blockCacheFor(tt.mem, tt.ok); got != tt.want {
			t.Errorf("blockCacheFor(%d MiB, %v) = %d MiB, want %d MiB", tt.mem/mib, tt.ok, got/mib, tt.want/mib)
		}
	}
	o := Options{DataDir: t.TempDir()}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.BlockCacheBytes != DefaultBlockCacheBytes() || o.BlockCacheBytes < 8*mib || o.BlockCacheBytes > 64*mib {
		t.Errorf("default block cache %d, want DefaultBlockCacheBytes() %d within 8-64 MiB", o.BlockCacheBytes, DefaultBlockCacheBytes())
	}
	o = Options{DataDir: t.TempDir(), BlockCacheBytes: 3 * mib}
	if err := o.Validate(); err != nil || o.BlockCacheBytes != 3*mib {
		t.Errorf("an explicit block cache: %d, %v; want 3 MiB kept", o.BlockCacheBytes, err)
	}
}
