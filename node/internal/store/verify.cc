// See verify.h.

#include "verify.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/table_properties.h>

namespace {

char *copy_bytes(const char *p, size_t n) {
	char *out = static_cast<char *>(std::malloc(n > 0 ? n : 1));
	if (out != nullptr && n > 0) {
		std::memcpy(out, p, n);
	}
	return out;
}

char *copy_string(const std::string &s) {
	char *out = copy_bytes(s.data(), s.size() + 1);
	if (out != nullptr) {
		out[s.size()] = '\0';
	}
	return out;
}

} // namespace

extern "C" void store_verify_sst(const char *path, store_sst_info *info) {
	std::memset(info, 0, sizeof *info);
	try {
		rocksdb::Options opts;
		rocksdb::SstFileReader reader(opts);
		rocksdb::Status s = reader.Open(path);
		if (!s.ok()) {
			info->err = copy_string(s.ToString());
			return;
		}
		info->opened = 1;
		std::shared_ptr<const rocksdb::TableProperties> props = reader.GetTableProperties();
		if (props) {
			info->column_family = copy_string(props->column_family_name);
			info->entries = props->num_entries;
			info->deletions = props->num_deletions;
			info->range_deletions = props->num_range_deletions;
		}
		rocksdb::ReadOptions ro;
		ro.verify_checksums = true;
		ro.fill_cache = false;
		{
			std::unique_ptr<rocksdb::Iterator> it(reader.NewIterator(ro));
			it->SeekToFirst();
			if (it->Valid()) {
				rocksdb::Slice k = it->key();
				info->smallest = copy_bytes(k.data(), k.size());
				info->smallest_len = k.size();
			}
			it->SeekToLast();
			if (it->Valid()) {
				rocksdb::Slice k = it->key();
				info->largest = copy_bytes(k.data(), k.size());
				info->largest_len = k.size();
			}
		}
		s = reader.VerifyChecksum(ro);
		if (!s.ok()) {
			info->err = copy_string(s.ToString());
		}
	} catch (const std::exception &e) {
		info->err = copy_string(std::string("exception: ") + e.what());
	} catch (...) {
		info->err = copy_string("unknown exception");
	}
}

extern "C" void store_sst_info_free(store_sst_info *info) {
	std::free(info->column_family);
	std::free(info->smallest);
	std::free(info->largest);
	std::free(info->err);
	std::memset(info, 0, sizeof *info);
}
