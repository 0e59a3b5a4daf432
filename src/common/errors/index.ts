export * from './mm-error';
export * from './error-catalogue';
