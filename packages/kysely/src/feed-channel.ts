/**
 * The one Postgres `LISTEN` channel of channelkit; a notification's payload is the topic, a
 * newline, the message. Its own module: the request path's statements notify on it too
 * (a turn passed), and they must not import the feed's driver code.
 */
export const FEED_CHANNEL = "channelkit_feed";
