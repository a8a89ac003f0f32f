// Token shards through the dataloader (llmc/dataloader.h): dataloader_try_init on
// one or two shards, then batches across epochs with dataloader_try_next_batch.
// Every batch must be the B*T+1 tokens of its slot in the file, targets shifted by
// one, all inside the vocabulary.
// Input: byte 0: B-1 (bits 0-1), a second shard (bit 6), shuffle (bit 7); byte 1:
// T-1 (bits 0-3); bytes 2-3: vocab_size-1 (little-endian); the rest: the shard.
#include "../llmc/dataloader.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) { return 0; }
    int B = 1 + (data[0] & 3), two = (data[0] >> 6) & 1, shuffle = data[0] >> 7, T = 1 + (data[1] & 15);
    int vocab = 1 + (data[2] | data[3] << 8);
    const uint8_t *shard = data + 4;
    size_t shard_size = size - 4;
    fuzz_write_file("shard_0.bin", shard, shard_size);
    char pattern[4200];
    snprintf(pattern, sizeof(pattern), "%s/shard_%s.bin", fuzz_dir(), two ? "[01]" : "0");
    if (two) { fuzz_write_file("shard_1.bin", shard, shard_size); }
    else { char p1[4200]; snprintf(p1, sizeof(p1), "%s/shard_1.bin", fuzz_dir()); unlink(p1); }
    DataLoader loader;
    char err[4096 + 256];
    if (dataloader_try_init(&loader, pattern, "-i", B, T, vocab, shuffle, 1234, err, sizeof(err)) != 0) {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
        return 0;
    }
    fuzz_check(loader.num_shards == 1 + two, "shard count");
    const size_t n = (size_t)B * T;
    size_t batches = 2 * loader.batches_per_epoch + 1;
    if (batches > 64) { batches = 64; }
    for (size_t b = 0; b < batches; b++) {
        int rc = dataloader_try_next_batch(&loader, err, sizeof(err));
        if (rc < 0) {
            // only a token outside the vocabulary in this batch's slot fails it
            fuzz_check(strstr(err, "outside the vocabulary") != NULL, "only a bad token fails a batch: %s", err);
            size_t offset = loader.slot_order[loader.pos.slot_pos] * n;
            int bad = 0;
            for (size_t i = 0; i < n + 1; i++) {
                const uint8_t *t = shard + 1024 + (offset + i) * 2;
                bad |= (t[0] | t[1] << 8) >= vocab;
            }
            fuzz_check(bad, "a batch failed for a bad token its slot does not have");
            break;
        }
        fuzz_check(rc == (b > 0 && b % loader.batches_per_epoch == 0), "a new epoch after each epoch's batches");
        size_t offset = loader.slot_order[loader.pos.slot_pos - 1] * n;
        const uint8_t *tokens = shard + 1024 + offset * 2;
        fuzz_check(1024 + (offset + n + 1) * 2 <= shard_size, "the slot lies inside the shard");
        for (size_t i = 0; i < n; i++) {
            int in = tokens[2 * i] | tokens[2 * i + 1] << 8, tg = tokens[2 * i + 2] | tokens[2 * i + 3] << 8;
            fuzz_check(loader.inputs[i] == in && loader.targets[i] == tg, "batch %zu token %zu as in the file", b, i);
            fuzz_check(in < vocab && tg < vocab, "tokens inside the vocabulary");
        }
    }
    dataloader_free(&loader);
    return 0;
}
