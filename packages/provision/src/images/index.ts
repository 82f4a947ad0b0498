export {
  type ImageCatalog,
  type ImageRecord,
  imageCatalog,
  type RegisterImageInput,
  registerImage,
  resolveImageRef,
} from './catalog';
