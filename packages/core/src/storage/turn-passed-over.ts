/**
 * What {@link Storage.claimTurn} throws when the conversation serves a ticket past the one
 * claimed: the run waited while its turn came and went (its instance could not claim it
 * within the time a passed turn waits, a stalled event loop or a database out of reach, and
 * a later run took the turn over). The run then takes a new ticket, at the end of the queue,
 * rather than wait for a turn that will not come again.
 */
export class TurnPassedOver extends Error {
  constructor(conversationId: string, ticket: number) {
    super(`channelkit: ticket ${ticket} of conversation ${conversationId} was passed over`);
    this.name = "TurnPassedOver";
  }
}
