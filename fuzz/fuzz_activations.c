// test_gpt2's reference activations file (llmc/debug_state.h): activations_try_load.
#include "../llmc/debug_state.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("activations.bin", data, size);
    Reference ref = {0};
    char err[4096 + 256];
    if (activations_try_load(&ref, path, err, sizeof(err)) != 0) {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
        fuzz_check(ref.records == NULL, "nothing held after an error");
        return 0;
    }
    size_t pos = 1024;
    for (int i = 0; i < ref.num_records; i++) {
        const Record *r = &ref.records[i];
        fuzz_check(strlen(r->name) < 64, "record name");
        pos += 64 + 20;
        fuzz_check(pos + r->count * 4 <= size, "record %d inside the file", i);
        fuzz_check(r->count == 0 || memcmp(r->data, data + pos, r->count * 4) == 0, "record %d's data", i);
        pos += r->count * 4;
    }
    fuzz_check(pos == size, "the file holds exactly the records");
    activations_free(&ref);
    return 0;
}
