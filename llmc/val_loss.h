/*
The loss of a model over token shards: the mean over the first n batches of each batch's
mean next-token cross-entropy, as a float. train_gpt2's validation loss and eval's -j.
With several ranks (llmc/collectives.h; one rank of one otherwise), rank r evaluates
batches r, r+N, r+2N, ... and the sums are added in rank order.
*/
#pragma once

#include "collectives.h"
#include "dataloader.h"
#include "gpt2.h"

static float validation_loss(GPT2 *model, DataLoader *loader, int n) {
    dataloader_reset(loader);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(loader);
        if (i % zero.size != zero.rank) { continue; }
        sum += gpt2_forward(model, loader->inputs, loader->targets, loader->B, loader->T);
    }
    zero_allreduce_f64(&sum, 1, ZERO_SUM);
    return (float)(sum / n);
}
