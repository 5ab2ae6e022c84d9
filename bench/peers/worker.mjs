// The piscina peer's task: W1/W2's echo plugin in JavaScript (returns its payload).
export default function echo(payload) {
  return payload;
}
