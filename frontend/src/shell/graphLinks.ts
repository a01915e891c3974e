// URLs of the app's pages (the Django routes in ballast/urls.py).
export const graphUrl = (id: number) => `/graphs/${id}/`;
export const runUrl = (id: number) => `/runs/${id}/`;
