/** Estimates the tokens of a message's content; pluggable with the `estimateTokens` option. */
export type TokenEstimator = (content: string) => number;

/** The default estimate: one token per four characters, rounded up. */
export const estimateTokens: TokenEstimator = (content) => Math.ceil(content.length / 4);
