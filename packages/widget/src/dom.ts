/** Attribute values: `true` sets an empty attribute, `false` leaves it out. */
export type Attributes = Record<string, string | boolean>;

/** Creates an element with its attributes and children; text children are set as text, never parsed. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== false) element.setAttribute(name, value === true ? "" : value);
  }
  element.append(...children);
  return element;
}

/** An icon from constant SVG markup (never from data), hidden from assistive technology. */
export function icon(paths: string): Element {
  const holder = document.createElement("span");
  holder.innerHTML = `<svg viewBox="0 0 24 24" aria-hidden="true" focusable="false">${paths}</svg>`;
  return holder.firstElementChild as Element;
}
